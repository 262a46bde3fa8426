package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/rollboot/rollboot/internal/parallel"
)

// historyKnown is the history as this store last listed it, with the records it
// appended and pruned since: PruneHistory prunes from it instead of listing the
// whole history after every closed cycle (at 1,000 hosts, a list of the kept
// records per cycle). It is listed again when it may be wrong: the first time,
// after a write or delete that did not go as expected (a conflict, an error),
// and after relistEvery appends, so that records it never saw (another
// coordinator's, one stored by an earlier attempt) are pruned too. Between
// lists the history can so exceed keep only by such unseen records, never lose
// one it should keep: it deletes only records it listed or wrote, oldest first,
// with CAS on the index it knows.
type historyKnown struct {
	pruning sync.Mutex // held by a prune (Store.PruneHistory) throughout
	mu      sync.Mutex
	current bool
	recs    []historyEntry // sorted by path: oldest first
	appends int            // appends since the last list
	// listedAt is the index of the last list: a record written at or before
	// it was in that list, or deleted since.
	listedAt uint64
	// unlisted: the records this store wrote while no list was current, for
	// the next list to add those it was too early to show.
	unlisted []historyEntry
}

type historyEntry struct {
	path   string
	modify uint64
}

// historyRelistEvery bounds how many appends go without a list of the history.
const historyRelistEvery = 256

func entryCompare(a, b historyEntry) int { return strings.Compare(a.path, b.path) }

// added notes a record this store created at path with index modify. Its
// write may have ended before a list that shows it, and that record may be
// pruned already: one at or before the list's index is not added again.
func (h *historyKnown) added(path string, modify uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := historyEntry{path: path, modify: modify}
	if !h.current {
		if len(h.unlisted) < historyRelistEvery { // beyond, unseen until a later list: bounded
			h.unlisted = append(h.unlisted, e)
		}
		return
	}
	h.insertLocked(e)
	h.appends++
}

// insertLocked adds e to the known records unless a list at or after its
// write knew of it.
func (h *historyKnown) insertLocked(e historyEntry) {
	if e.modify <= h.listedAt {
		return
	}
	if i, found := slices.BinarySearchFunc(h.recs, e, entryCompare); !found {
		h.recs = slices.Insert(h.recs, i, e)
	}
}

// forget marks the known history as possibly wrong: the next append lists it.
func (h *historyKnown) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current, h.recs = false, nil
}

// prunable takes out of the known history, and returns, the oldest records
// beyond keep; ok is false when it must be listed first.
func (h *historyKnown) prunable(keep int) (old []historyEntry, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.current || h.appends >= historyRelistEvery {
		return nil, false
	}
	n := max(0, len(h.recs)-keep)
	old = slices.Clone(h.recs[:n])
	h.recs = slices.Delete(h.recs, 0, n)
	return old, true
}

// listed replaces the known history with a list of it (sorted by path) at
// index at, with the records written while no list was current that it was
// too early to show.
func (h *historyKnown) listed(recs []historyEntry, at uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current, h.recs, h.appends, h.listedAt = true, recs, 0, at
	for _, e := range h.unlisted {
		h.insertLocked(e)
	}
	h.unlisted = nil
}

// PruneHistory deletes the oldest history records beyond keep: those the
// known history shows, or, when it must be listed, those a list shows. Calls
// go one at a time (historyKnown.pruning), so that appends side by side list
// the history once, not once each; the deletes go side by side,
// ReadParallelism at a time.
func (s *Store) PruneHistory(ctx context.Context, keep int) error {
	s.history.pruning.Lock()
	defer s.history.pruning.Unlock()
	old, ok := s.history.prunable(keep)
	if !ok {
		metas, at, err := s.list(ctx, s.historyPrefix(), 0, 0)
		if err != nil {
			return err
		}
		recs := make([]historyEntry, 0, len(metas))
		for _, m := range metas {
			recs = append(recs, historyEntry{path: m.Path, modify: m.ModifyIndex})
		}
		slices.SortFunc(recs, entryCompare)
		s.history.listed(recs, at)
		if old, ok = s.history.prunable(keep); !ok {
			return nil // changed meanwhile: the next prune lists again
		}
	}
	errs := make([]error, len(old))
	parallel.Each(len(old), ReadParallelism, nil, func(i int) {
		err := s.remove(ctx, old[i].path, old[i].modify)
		if err != nil {
			s.history.forget()
		}
		if !errors.Is(err, ErrConflict) {
			errs[i] = err
		}
	})
	return errors.Join(errs...)
}

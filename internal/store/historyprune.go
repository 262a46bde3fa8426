package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
)

// historyKnown is the history as this store last listed it, with the records it
// appended and pruned since: AppendHistory prunes from it instead of listing the
// whole history after every closed cycle (at 1,000 hosts, a list of the kept
// records per cycle). It is listed again when it may be wrong: the first time,
// after a write or delete that did not go as expected (a conflict, an error),
// and after relistEvery appends, so that records it never saw (another
// coordinator's, one stored by an earlier attempt) are pruned too. Between
// lists the history can so exceed keep only by such unseen records, never lose
// one it should keep: it deletes only records it listed or wrote, oldest first,
// with CAS on the index it knows.
type historyKnown struct {
	mu      sync.Mutex
	current bool
	recs    []historyEntry // sorted by path: oldest first
	appends int            // appends since the last list
}

type historyEntry struct {
	path   string
	modify uint64
}

// historyRelistEvery bounds how many appends go without a list of the history.
const historyRelistEvery = 256

func entryCompare(a, b historyEntry) int { return strings.Compare(a.path, b.path) }

// added notes a record this store created at path with index modify.
func (h *historyKnown) added(path string, modify uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.current {
		return
	}
	e := historyEntry{path: path, modify: modify}
	if i, found := slices.BinarySearchFunc(h.recs, e, entryCompare); !found {
		h.recs = slices.Insert(h.recs, i, e)
	}
	h.appends++
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

// listed replaces the known history with a list of it (sorted by path).
func (h *historyKnown) listed(recs []historyEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current, h.recs, h.appends = true, recs, 0
}

// pruneHistory deletes the oldest history records beyond keep: those the known
// history shows, or, when it must be listed, those a list shows.
func (s *Store) pruneHistory(ctx context.Context, keep int) error {
	old, ok := s.history.prunable(keep)
	if !ok {
		metas, _, err := s.list(ctx, s.historyPrefix(), 0, 0)
		if err != nil {
			return err
		}
		recs := make([]historyEntry, 0, len(metas))
		for _, m := range metas {
			recs = append(recs, historyEntry{path: m.Path, modify: m.ModifyIndex})
		}
		slices.SortFunc(recs, entryCompare)
		s.history.listed(recs)
		if old, ok = s.history.prunable(keep); !ok {
			return nil // changed meanwhile: the next append lists again
		}
	}
	for _, e := range old {
		if err := s.remove(ctx, e.path, e.modify); err != nil {
			s.history.forget()
			if !errors.Is(err, ErrConflict) {
				return err
			}
		}
	}
	return nil
}

package notify

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"

	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/store"
)

// LedgerStore reads, writes and deletes the ledger's variables, each named by
// its part (Parts, PausePart, LegacyPart), with check-and-set; *store.Store
// implements it.
type LedgerStore interface {
	NotifyLedger(ctx context.Context, part string) (map[string]string, uint64, error) // store.ErrNotFound when absent
	PutNotifyLedger(ctx context.Context, part string, items map[string]string, modifyIndex uint64) (uint64, error)
	DeleteNotifyLedger(ctx context.Context, part string, modifyIndex uint64) error
}

// stored is the ledger's variables as last read or written: the items and
// ModifyIndex of each part that exists.
type stored struct {
	items map[string]map[string]string
	index map[string]uint64
}

// exists reports whether the ledger exists: its pause part, written after the
// shards, or the single variable of version 1.
func (s stored) exists() bool {
	_, head := s.index[PausePart]
	_, legacy := s.index[LegacyPart]
	return head || legacy
}

// partNames are every part read: the pause, each shard, the single variable
// of version 1.
func partNames() []string {
	names := []string{PausePart, LegacyPart}
	for i := range LedgerShards {
		names = append(names, strconv.Itoa(i))
	}
	return names
}

// readParts reads every part of the ledger, at most store.ReadParallelism at a
// time; an absent part is left out. The first error other than ErrNotFound is
// returned.
func readParts(ctx context.Context, st LedgerStore) (stored, error) {
	names := partNames()
	s := stored{items: map[string]map[string]string{}, index: map[string]uint64{}}
	var (
		mu    sync.Mutex
		first error
	)
	parallel.Each(len(names), store.ReadParallelism, func() bool { return ctx.Err() != nil }, func(i int) {
		items, idx, err := st.NotifyLedger(ctx, names[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			s.items[names[i]], s.index[names[i]] = items, idx
		case !errors.Is(err, store.ErrNotFound) && first == nil:
			first = err
		}
	})
	if first == nil {
		first = ctx.Err()
	}
	return s, first
}

// ReadLedger reads and decodes the ledger (DecodeLedger); store.ErrNotFound
// when it does not exist yet.
func ReadLedger(ctx context.Context, st LedgerStore) (Ledger, []string, error) {
	s, err := readParts(ctx, st)
	if err != nil {
		return Ledger{}, nil, err
	}
	if !s.exists() {
		return Ledger{}, nil, store.ErrNotFound
	}
	return DecodeLedger(s.items)
}

// sameShard reports whether a shard's items are those stored (nil: absent; a
// shard with no host is the same as an absent one).
func sameShard(want, have map[string]string) bool {
	if len(want) <= 1 && len(have) <= 1 {
		return true // the version alone, or nothing
	}
	return maps.Equal(want, have)
}

// writeParts stores the parts of l that differ from s, and records in s what
// it wrote: the shards that changed (writeShards); then, once every shard is
// stored, the pause part (its existence says the ledger exists); then the
// deletion of the single variable of version 1, which the parts now record.
// Each with check-and-set: store.ErrConflict when another coordinator wrote a
// part since s was read. It returns the number of variables written or
// deleted.
func writeParts(ctx context.Context, st LedgerStore, l Ledger, s *stored) (int, error) {
	if s.items == nil {
		s.items, s.index = map[string]map[string]string{}, map[string]uint64{}
	}
	want := l.Parts()
	writes, err := writeShards(ctx, st, want, s)
	if err != nil {
		return writes, err
	}
	if _, ok := s.index[PausePart]; !ok || !maps.Equal(want[PausePart], s.items[PausePart]) {
		idx, err := st.PutNotifyLedger(ctx, PausePart, want[PausePart], s.index[PausePart])
		if err != nil {
			return writes, err
		}
		s.items[PausePart], s.index[PausePart] = want[PausePart], idx
		writes++
	}
	if idx, ok := s.index[LegacyPart]; ok {
		if err := st.DeleteNotifyLedger(ctx, LegacyPart, idx); err != nil {
			return writes, err
		}
		delete(s.items, LegacyPart)
		delete(s.index, LegacyPart)
		writes++
	}
	return writes, nil
}

// writeShards stores the shards of want that differ from s, at most
// store.ReadParallelism at a time, and records in s those it wrote. Of the
// errors, a conflict is returned first: it calls for a read of the ledger.
func writeShards(ctx context.Context, st LedgerStore, want map[string]map[string]string, s *stored) (int, error) {
	var (
		changed []string
		indexes []uint64 // each changed shard's, read here: the workers write s
	)
	for i := range LedgerShards {
		if name := strconv.Itoa(i); !sameShard(want[name], s.items[name]) {
			changed, indexes = append(changed, name), append(indexes, s.index[name])
		}
	}
	var (
		mu     sync.Mutex
		writes int
		first  error
	)
	parallel.Each(len(changed), store.ReadParallelism, func() bool { return ctx.Err() != nil }, func(i int) {
		name := changed[i]
		items := want[name]
		if items == nil {
			items = map[string]string{"version": ledgerVersion} // Nomad stores no empty variable
		}
		idx, err := st.PutNotifyLedger(ctx, name, items, indexes[i])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if first == nil || errors.Is(err, store.ErrConflict) {
				first = err
			}
			return
		}
		s.items[name], s.index[name] = items, idx
		writes++
	})
	if first == nil {
		first = ctx.Err()
	}
	return writes, first
}

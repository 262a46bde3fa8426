// Package copykeep keeps the copies of the plans and host records
// (store/copies.go) for the leading coordinator: loaded for a term's first
// read, and written after its passes, beside the loop while it runs.
package copykeep

import (
	"context"
	"log/slog"
	"sync"
)

// The copies spare a new leader's first pass a read of every plan and every
// record: it loads them first, and the plans and records it then reads come
// from them wherever the lists show a variable at the index its copy holds.
// The coordinator writes them after its passes: in Run beside the loop (a
// write does not delay the next pass), outside Run at the end of the pass.

// Store loads, counts and writes the copies; *store.Store implements it.
type Store interface {
	LoadCopies(ctx context.Context) error
	CopiesUsed() (used, listed int)
	WriteCopies(ctx context.Context) (int, error)
}

// Keeper loads and writes the copies of one coordinator; its methods are the
// pass goroutine's.
type Keeper struct {
	Store Store
	Log   *slog.Logger
	// kick wakes the term's writer (nil: none runs, outside Run).
	kick chan<- struct{}
}

// Load loads the copies for the plans and records a first read reads. A
// failure costs only time: every plan and record is then read one by one.
func (k *Keeper) Load(ctx context.Context) {
	if err := k.Store.LoadCopies(ctx); err != nil && ctx.Err() == nil {
		k.Log.Warn("the copies of the plans and host records could not be read: reading each one", "err", err)
	}
}

// Used logs how many of the plans and records a first read took from their
// copies.
func (k *Keeper) Used() {
	used, listed := k.Store.CopiesUsed()
	k.Log.Info("plans and host records read", "from_copies", used, "read_one_by_one", listed-used)
}

// Start starts the writer of the copies of a term, which writes them after
// each pass that asks (After), until ctx ends (wg waits for it); stop ends
// the term's asking.
func (k *Keeper) Start(ctx context.Context, wg *sync.WaitGroup) (stop func()) {
	kick := make(chan struct{}, 1)
	k.kick = kick
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				k.write(ctx)
			}
		}
	})
	return func() { k.kick = nil }
}

// After has the copies written after a pass: by the term's writer while one
// runs, else now.
func (k *Keeper) After(ctx context.Context) {
	if k.kick == nil {
		k.write(ctx)
		return
	}
	select {
	case k.kick <- struct{}{}:
	default: // a kick is waiting: it writes what this pass changed too
	}
}

func (k *Keeper) write(ctx context.Context) {
	n, err := k.Store.WriteCopies(ctx)
	if err != nil && ctx.Err() == nil {
		k.Log.Warn("copies of the plans and host records not written: a new leader reads more one by one", "err", err)
	}
	if n > 0 {
		k.Log.Debug("copies of the plans and host records written", "shards", n)
	}
}

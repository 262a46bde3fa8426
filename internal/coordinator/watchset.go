package coordinator

import (
	"context"
	"sync"
)

// watchSet runs one watch per key of a set that each pass may change (the
// nodes whose allocations, or whose Consul checks, a host waits for): set
// starts the watches of new keys and ends those of keys no longer wanted. Each
// runs until its key is dropped or ctx ends.
type watchSet struct {
	ctx     context.Context
	wg      sync.WaitGroup
	running map[string]context.CancelFunc
}

// set runs run for every key of want that has no watch yet, and ends the
// watches of the keys not in want.
func (w *watchSet) set(want map[string]bool, run func(ctx context.Context, key string)) {
	if w.running == nil {
		w.running = map[string]context.CancelFunc{}
	}
	for key, cancel := range w.running {
		if !want[key] {
			cancel()
			delete(w.running, key)
		}
	}
	for key := range want {
		if _, ok := w.running[key]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(w.ctx)
		w.running[key] = cancel
		w.wg.Go(func() { run(ctx, key) })
	}
}

// stop ends every watch and waits for them.
func (w *watchSet) stop() {
	for _, cancel := range w.running {
		cancel()
	}
	w.wg.Wait()
}

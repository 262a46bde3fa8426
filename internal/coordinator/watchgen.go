package coordinator

import "sync"

// watchGen tells a pass whether what it read last is still current: a watch (a
// blocking query on it) counts its answers that saw a change, and its failures,
// as generations; while it is live (it answered since its last failure), a pass
// that read at the current generation need not read again. The generation is
// taken before the read, so a change during the read makes the next pass read
// again.
type watchGen struct {
	mu   sync.Mutex
	gen  uint64
	live bool
}

// answered records an answer of the watch; changed: its index moved.
func (w *watchGen) answered(changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = true
	if changed {
		w.gen++
	}
}

// failed records a failure of the watch, or the end of its term.
func (w *watchGen) failed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = false
	w.gen++
}

// current returns the generation, and whether the watch is live.
func (w *watchGen) current() (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.live
}

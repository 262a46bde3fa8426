package coordinator

import (
	"context"
	"slices"
	"sync"

	"github.com/rollboot/rollboot/internal/store"
)

// The host records as the last pass read them, kept while the host watch has
// seen no change since: a pass over a cluster whose records did not change
// lists none of them (5,000 of them at 5,000 hosts). The coordinator never
// writes host records itself, so it cannot miss a write of its own; a record
// written by someone else wakes the watch (a blocking query on the records'
// prefix), which makes the next pass read them again. Without a live watch (it
// has not answered yet, or it failed; or outside Run) every pass reads them.
type hostsCache struct {
	mu sync.Mutex
	// gen counts the watch's answers with a change, and its failures; live: it
	// answered since its last failure.
	gen  uint64
	live bool
	// index: the index the watch last answered at.
	index uint64
	// what the last pass read, at generation at.
	recs []store.HostRecord
	bad  []store.BadRecord
	at   uint64
	kept bool
}

// answered records an answer of the watch at index; changed: its index moved.
func (h *hostsCache) answered(index uint64, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live, h.index = true, index
	if changed {
		h.gen++
	}
}

// failed records a failure of the watch (or the end of its term).
func (h *hostsCache) failed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = false
	h.gen++
	h.recs, h.bad, h.kept = nil, nil, false
}

// hostRecords returns the host records and those that cannot be used: as the
// last pass read them while nothing changed, else read now.
func (c *Coordinator) hostRecords(ctx context.Context) ([]store.HostRecord, []store.BadRecord, error) {
	h := &c.hostsCache
	h.mu.Lock()
	gen, live := h.gen, h.live
	if live && h.kept && h.at == gen {
		// Clipped: a caller's append must not write into the kept arrays.
		recs, bad := slices.Clip(h.recs), slices.Clip(h.bad)
		h.mu.Unlock()
		return recs, bad, nil
	}
	h.mu.Unlock()
	// The generation is taken before the read: a change during it makes the
	// next pass read again.
	recs, bad, _, err := c.opt.Store.HostsChecked(ctx, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	if live {
		h.recs, h.bad, h.at, h.kept = recs, bad, gen, true
	}
	h.mu.Unlock()
	return slices.Clip(recs), slices.Clip(bad), nil
}

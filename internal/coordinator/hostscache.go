package coordinator

import (
	"context"
	"slices"
	"sync"

	"github.com/rollboot/rollboot/internal/store"
)

// The host records as the last pass read them, kept while the host watch has
// seen no change since: a pass over a cluster whose records did not change
// reads none of them. The watch is a blocking query on the records' prefix,
// which lists them all (paths and ModifyIndex) at every change: the pass after
// a change takes that list and reads only the records it shows changed (the
// store's path cache), instead of listing them all again (5,000 at 5,000
// hosts). The reads stay in the pass, bounded like its other steps. The
// coordinator never writes host records itself, so it cannot miss a write of
// its own. Without a live watch (it has not answered yet, or it failed; or
// outside Run) every pass lists and reads them itself.
//
// The watch lists again only once a pass took its last list (taken): when
// every host's sentinel appears together, a thousand agents write their records
// within a second, and a watch listing at each of them listed a thousand paths
// every few milliseconds, a tenth of the machine, though a pass only ever uses
// the last list. A change during a pass still wakes the next one at once: the
// watch asks again, from the index it last answered at, as soon as the pass
// takes the list.
type hostsCache struct {
	mu sync.Mutex
	// gen counts the watch's answers with a change, and its failures; live: it
	// answered since its last failure.
	gen  uint64
	live bool
	// index and list: the index the watch last answered at, and the list it
	// read then (listed: one was read since its last failure).
	index  uint64
	list   store.HostList
	listed bool
	// taken is closed when a pass takes the list the watch answered with after
	// a change (nil: none waits to be taken).
	taken chan struct{}
	// what the last pass read, at generation at.
	recs []store.HostRecord
	bad  []store.BadRecord
	at   uint64
	kept bool
}

// answered records an answer of the watch at index, with the list it read;
// changed: its index moved.
func (h *hostsCache) answered(index uint64, list store.HostList, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = true
	if changed {
		h.gen++
		if h.taken == nil {
			h.taken = make(chan struct{})
		}
	}
	h.index, h.list, h.listed = index, list, true
}

// untaken returns a channel closed once a pass takes the watch's last list
// after a change (nil: it has been taken, or no change waits).
func (h *hostsCache) untaken() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taken
}

// takeLocked marks the watch's list as taken by a pass (h.mu held).
func (h *hostsCache) takeLocked() {
	if h.taken != nil {
		close(h.taken)
		h.taken = nil
	}
}

// failed records a failure of the watch (or the end of its term).
func (h *hostsCache) failed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = false
	h.gen++
	h.takeLocked() // the watch's next query is its retry
	h.recs, h.bad, h.kept = nil, nil, false
	h.list, h.listed = store.HostList{}, false
}

// hostRecords returns the host records and those that cannot be used: as the
// last pass read them while nothing changed, else read now (from the watch's
// list when it has one).
func (c *Coordinator) hostRecords(ctx context.Context) ([]store.HostRecord, []store.BadRecord, error) {
	h := &c.hostsCache
	h.mu.Lock()
	gen, live, list, listed := h.gen, h.live, h.list, h.listed
	h.takeLocked()
	if live && h.kept && h.at == gen {
		// Clipped: a caller's append must not write into the kept arrays.
		recs, bad := slices.Clip(h.recs), slices.Clip(h.bad)
		h.mu.Unlock()
		return recs, bad, nil
	}
	h.mu.Unlock()
	// The generation is taken before the read: a change during it makes the
	// next pass read again.
	var (
		recs []store.HostRecord
		bad  []store.BadRecord
		err  error
	)
	if live && listed {
		recs, bad, err = c.opt.Store.HostsIn(ctx, list)
	} else {
		recs, bad, _, err = c.opt.Store.HostsChecked(ctx, 0, 0)
	}
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	if live && h.gen == gen {
		h.recs, h.bad, h.at, h.kept = recs, bad, gen, true
	}
	h.mu.Unlock()
	return slices.Clip(recs), slices.Clip(bad), nil
}

package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// The control state (the pause, and each host's request, cancel and release)
// as the last pass read it, kept while the watches of the control variable and
// of the requests have seen no change since: a pass over a cluster whose
// control did not change sends neither of the two reads (the variable and the
// list of the per-host ones) that made half of the requests of a pass over an
// idle cluster. The two blocking queries wake for any write to what Control
// reads (the control variable; any variable under the requests prefix), as
// the host watch does for the records (hostscache.go). The coordinator's own
// writes of the control state (a request, cancel or release carried out) are
// not waited for: the pass after one reads it again (updateControl), since the
// watch may not have answered yet. Without both watches live (not answered
// yet in this term, failed, or outside Run and Follow) every pass reads it.
type controlCache struct {
	mu sync.Mutex
	// gen counts the changes the watches saw, their failures and the
	// coordinator's own writes; term: the context of the watches; live: each
	// watch (controlWatch, requestsWatch) answered since its last failure.
	gen  uint64
	term context.Context
	live [2]bool
	// what the last pass read, at generation at.
	ctl  store.Control
	at   uint64
	kept bool
}

// The watches controlCache follows.
const (
	controlWatch = iota
	requestsWatch
)

// start begins a term of the watches: nothing they answered before counts.
func (cc *controlCache) start(term context.Context) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.term, cc.live, cc.kept = term, [2]bool{}, false
	cc.gen++
}

// answered records an answer of a watch; changed: its index moved.
func (cc *controlCache) answered(which int, changed bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.live[which] = true
	if changed {
		cc.gen++
	}
}

// failed records a failure of a watch, or a write of the coordinator's own:
// the next pass reads the control state again.
func (cc *controlCache) failed(which int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if which >= 0 {
		cc.live[which] = false
	}
	cc.gen++
	cc.kept = false
}

// control returns the control state: as the last pass read it while nothing
// changed since, else read now.
func (c *Coordinator) control(ctx context.Context) (store.Control, error) {
	cc := &c.controlCache
	cc.mu.Lock()
	gen := cc.gen
	live := cc.term != nil && cc.term.Err() == nil && cc.live[controlWatch] && cc.live[requestsWatch]
	if live && cc.kept && cc.at == gen {
		ctl := cc.ctl
		cc.mu.Unlock()
		return ctl, nil
	}
	cc.mu.Unlock()
	// The generation is taken before the read: a change during it makes the
	// next pass read again.
	ctl, err := c.opt.Store.Control(ctx)
	if err != nil {
		return store.Control{}, err
	}
	cc.mu.Lock()
	if live && cc.gen == gen {
		cc.ctl, cc.at, cc.kept = ctl, gen, true
	}
	cc.mu.Unlock()
	return ctl, nil
}

// updateControl is Store.UpdateControl, after which the next pass reads the
// control state again (whether or not the write went through).
func (c *Coordinator) updateControl(ctx context.Context, fn func(*store.Control) error) error {
	_, err := c.opt.Store.UpdateControl(ctx, fn)
	c.controlCache.failed(-1)
	return err
}

func (c *Coordinator) watchControl(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchControl(ctx, idx, 5*time.Minute)
	c.controlAnswered(controlWatch, idx, n, err)
	return n, err
}

// watchRequests wakes the reconcile loop when a host's request, cancel or release
// variable (<prefix>/requests/<host>) changes.
func (c *Coordinator) watchRequests(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchRequests(ctx, idx, 5*time.Minute)
	c.controlAnswered(requestsWatch, idx, n, err)
	return n, err
}

func (c *Coordinator) controlAnswered(which int, idx, n uint64, err error) {
	if err != nil {
		c.controlCache.failed(which)
		return
	}
	c.controlCache.answered(which, n != idx)
}

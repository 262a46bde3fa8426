package coordinator

import (
	"context"
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

// controlGen returns the generation of the control state as the pass took the
// watches' answers (the sum of the two watches', each of which only grows),
// and whether both watches are live.
func (c *Coordinator) controlGen() (uint64, bool) {
	ctl, req := c.seen.control, c.seen.requests
	return ctl.gen + req.gen, ctl.live && req.live
}

// control returns the control state: as the last pass read it while nothing
// changed since, else read now.
func (c *Coordinator) control(ctx context.Context) (store.Control, error) {
	gen, live := c.controlGen()
	if ctl, ok := c.controlRead.get(gen, live); ok {
		return ctl, nil
	}
	ctl, err := c.opt.Store.Control(ctx)
	if err != nil {
		return store.Control{}, err
	}
	c.controlRead.keep(gen, ctl)
	return ctl, nil
}

// updateControl is Store.UpdateControl, after which the next pass reads the
// control state again (whether or not the write went through). Only the
// decisions a pass carries out one after the other write the control state
// (planwrites.go: storedTogether leaves them out).
func (c *Coordinator) updateControl(ctx context.Context, fn func(*store.Control) error) error {
	_, err := c.opt.Store.UpdateControl(ctx, fn)
	c.controlRead.forget()
	return err
}

func (c *Coordinator) watchControl(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchControl(ctx, idx, 5*time.Minute)
	c.controlAnswered(func(a *answers) *watched[struct{}] { return &a.control }, idx, n, err)
	return n, err
}

// watchRequests wakes the reconcile loop when a host's request, cancel or release
// variable (<prefix>/requests/<host>) changes.
func (c *Coordinator) watchRequests(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchRequests(ctx, idx, 5*time.Minute)
	c.controlAnswered(func(a *answers) *watched[struct{}] { return &a.requests }, idx, n, err)
	return n, err
}

// controlAnswered leaves the answer of one of the two watches (which: its
// place in the answers) in the mailbox.
func (c *Coordinator) controlAnswered(which func(*answers) *watched[struct{}], idx, n uint64, err error) {
	c.mail.update(func(a *answers) {
		if err != nil {
			which(a).failed()
			return
		}
		which(a).answered(n, struct{}{}, n != idx)
	})
}

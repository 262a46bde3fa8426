package coordinator

import (
	"context"
	"sync"
)

// The copies of the plans and host records (store/copies.go) spare a new
// leader's first pass a read of every plan and every record: it loads them
// first, and the plans and records it then reads come from them wherever the
// lists show a variable at the index its copy holds. The coordinator writes
// them after its passes: in Run beside the loop (a write does not delay the
// next pass), outside Run at the end of the pass.

// firstRead reports whether this pass reads every plan: the first of a term,
// or the first after a write lost to another coordinator.
func (c *Coordinator) firstRead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plans == nil
}

// loadCopies loads the copies for the plans and records this pass reads. A
// failure costs only time: every plan and record is then read one by one.
func (c *Coordinator) loadCopies(ctx context.Context) {
	if err := c.opt.Store.LoadCopies(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("the copies of the plans and host records could not be read: reading each one", "err", err)
	}
}

// copiesUsed logs how many of the plans and records this first read took
// from their copies.
func (c *Coordinator) copiesUsed() {
	used, listed := c.opt.Store.CopiesUsed()
	c.log.Info("plans and host records read", "from_copies", used, "read_one_by_one", listed-used)
}

// startCopies starts the writer of the copies of this term, which WriteCopies
// after each pass that kicks it, until ctx ends (wg waits for it).
func (c *Coordinator) startCopies(ctx context.Context, wg *sync.WaitGroup) {
	kick := make(chan struct{}, 1)
	c.copiesKick = kick
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				c.writeCopies(ctx)
			}
		}
	})
}

// keepCopies has the copies written after a pass: by the term's writer in
// Run, else now.
func (c *Coordinator) keepCopies(ctx context.Context) {
	if c.copiesKick == nil {
		c.writeCopies(ctx)
		return
	}
	select {
	case c.copiesKick <- struct{}{}:
	default: // a kick is waiting: it writes what this pass changed too
	}
}

func (c *Coordinator) writeCopies(ctx context.Context) {
	n, err := c.opt.Store.WriteCopies(ctx)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("copies of the plans and host records not written: a new leader reads more one by one", "err", err)
	}
	if n > 0 {
		c.log.Debug("copies of the plans and host records written", "shards", n)
	}
}

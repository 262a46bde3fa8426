package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Follow starts the watches Run starts (the host records, the nodes, the
// control variable, the requests, the agent job, the stored policy) without
// Run's loop: passes made with ReconcileOnce then take what the watches read,
// as the passes of Run do, rather than reading it all themselves. It returns
// once the host record and node watches (and the policy's, when one is
// stored) have answered; stop ends the watches and waits for them. It serves
// to time passes as they run while leading (rollboot bench).
func (c *Coordinator) Follow(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c.startWatches(ctx, &wg, func() {})
	stop = func() {
		cancel()
		wg.Wait()
	}
	for !c.following() {
		select {
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("the watches did not answer: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return stop, nil
}

// following reports whether the watches a pass takes its reads from answered.
func (c *Coordinator) following() bool {
	m := &c.mail
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.a.hosts.live && m.a.nodes.val != nil && (c.opt.Policy == nil || m.a.policy.live)
}

// WatchedHosts returns the index the host record watch last answered at: a
// record written at or before it is read by the next pass.
func (c *Coordinator) WatchedHosts() uint64 {
	m := &c.mail
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.a.hosts.index
}

// WatchedNodes returns the index of the node list the node watch last kept (0:
// none, or it failed), for a benchmark that waits until a change is seen.
func (c *Coordinator) WatchedNodes() uint64 {
	m := &c.mail
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.a.nodes.val == nil {
		return 0
	}
	return m.a.nodes.index
}

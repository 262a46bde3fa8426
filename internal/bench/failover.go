package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// Failover is the first pass of a new leader after a fail-over on a cluster
// where every host is pending (they all need a reboot, the rollout paused), at
// one request latency.
type Failover struct {
	Hosts   int
	Latency time.Duration // every Nomad request of the timed passes waited this long
	Pending int           // hosts pending when the new leaders started
	// FirstPass is each new leader's first pass (ReconcileOnce, timed in
	// process); Requests the Nomad requests it sent.
	FirstPass []time.Duration
	Requests  []uint64
}

// failoverLeaders is how many new leaders make a first pass at each latency.
const failoverLeaders = 3

// runFailover measures a new leader's first pass on a cluster of hosts, at
// each of latencies. The bench writes every host's record, each needing a
// reboot, as its agent would (no agent runs); the rollout is paused, as an
// operator previewing a patch day leaves it, and a first coordinator makes
// passes until every host is pending: the state a leader that failed leaves
// to the next. Then, with the request latency set, new coordinators each make
// their first pass: everything read afresh, as a new leader's first pass in
// Run reads it (its watches have not answered yet). The cluster is set up
// with no latency.
func runFailover(ctx context.Context, o *Options, hosts int, latencies []time.Duration) ([]*Failover, error) {
	c, err := startCluster(ctx, clusterSpec{hosts: hosts, groups: o.Groups, concurrency: o.Concurrency, log: o.Log})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if _, err := c.st.UpdateControl(ctx, func(ct *store.Control) error {
		ct.Paused, ct.PauseReason, ct.PausedAt = true, "rollboot bench: every host pending", time.Now().UTC()
		return nil
	}); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	if _, err := c.writeRecordsEvery(ctx, 1); err != nil {
		return nil, err
	}
	pending, err := c.pendAll(ctx, o)
	if err != nil {
		return nil, err
	}
	var out []*Failover
	for _, latency := range latencies {
		if err := c.sim.SetRequestLatency(latency); err != nil {
			return nil, err
		}
		f := &Failover{Hosts: hosts, Latency: latency, Pending: pending}
		for range failoverLeaders {
			co, err := c.newCoordinator(o)
			if err != nil {
				return nil, err
			}
			c.sim.ResetRequestStats()
			t := time.Now()
			if err := co.ReconcileOnce(ctx); err != nil {
				return nil, fmt.Errorf("a new leader's first pass: %w", err)
			}
			f.FirstPass = append(f.FirstPass, time.Since(t))
			f.Requests = append(f.Requests, c.sim.RequestStats().Requests)
		}
		out = append(out, f)
	}
	return out, nil
}

// pendAll has a first coordinator make passes until every host of c has a
// pending plan (the rollout is paused: none is granted) and a pass wrote no
// variable (the state a leader that has led a while leaves), and returns how
// many are pending.
func (c *cluster) pendAll(ctx context.Context, o *Options) (int, error) {
	first, err := c.newCoordinator(o)
	if err != nil {
		return 0, err
	}
	pending, wrote := 0, 0
	for range 20 {
		seen := len(c.sim.Events(0))
		if err := first.ReconcileOnce(ctx); err != nil {
			return 0, fmt.Errorf("the first leader's pass: %w", err)
		}
		wrote = 0
		for _, e := range c.sim.Events(seen) {
			if e.Type == nomadsim.EventVarWrite || e.Type == nomadsim.EventVarDelete {
				wrote++
			}
		}
		plans, err := c.st.Plans(ctx)
		if err != nil {
			return 0, err
		}
		pending = 0
		for _, p := range plans {
			if p.Phase == store.PhasePending {
				pending++
			}
		}
		if pending == len(c.hosts) && wrote == 0 {
			return pending, nil
		}
	}
	return 0, fmt.Errorf("after 20 passes of the first leader, %d of %d hosts pending, and its last pass wrote %d variables", pending, len(c.hosts), wrote)
}

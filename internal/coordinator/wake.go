package coordinator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/loopmetrics"
	"github.com/rollboot/rollboot/internal/policy"
)

// When the coordinator runs a pass.
//
// Nomad wakes a blocking query only for a write to what it watches (nomad/rpc.go
// blockingRPC with memdb watch sets), never for the watcher's own writes to other
// data. So the coordinator watches everything that others change and it must
// react to (host records, the control variable, the node list), and it does not
// wait to be woken by its own writes:
//   - a pass that changed something is followed by another pass at once, until a
//     pass changes nothing (a host moves through pending, draining, rejoining and
//     idle in successive passes);
//   - a pass that failed is retried after a short backoff;
//   - a decision that waits for a time to pass (a backoff, a drain or rejoin
//     timeout) gets a pass at that time, and so does a freeze's start or end;
//   - a host that waits for its node's system jobs to run again after its reboot,
//     or for its workloads to be healthy, has its node's allocations watched (the
//     node list does not change when an allocation starts), and its node's Consul
//     checks with healthy.consul_checks (package rejoinwatch);
//   - and a full pass runs at least every resync interval.

// maxChainedPasses bounds the passes run back to back after changes: a decision
// that wrote on every pass would otherwise spin. Past it, the loop waits for a
// change, a timer or the resync as usual.
const maxChainedPasses = 20

// afterPass decides what follows a pass that did (changed) or did not change
// something, the chained-th run back to back: another at once (its writes may
// allow further decisions, and they wake none of the coordinator's watches), or
// the wait for a change, a timer or the resync. The chain ends at
// maxChainedPasses; it ends spinning when nothing but the coordinator's own
// writes changed meanwhile (no poke is pending). With a poke pending, as in a
// busy rollout where agents write at every step, the next pass runs at once
// anyway and the long chain is the rollout's progress, not a spin.
func afterPass(changed bool, chained int, poked bool) (again, spinning bool) {
	if !changed {
		return false, false
	}
	if chained < maxChainedPasses {
		return true, false
	}
	return false, !poked
}

// Registry is the Prometheus registry of the coordinator's metrics.
func (c *Coordinator) Registry() *prometheus.Registry { return c.metrics.Registry }

// Overrun is a reconcile pass that took longer than the resync interval.
type Overrun = loopmetrics.Overrun

// Overruns returns the passes that overran so far.
func (c *Coordinator) Overruns() Overrun { return c.passes.Overruns() }

// observePass records a pass's duration; one longer than the resync interval is an
// overrun: logged and counted, since decisions waited for it (every request has a
// deadline, so a pass cannot hang for ever, but a slow server still slows it).
func (c *Coordinator) observePass(took time.Duration, end time.Time) {
	if n := c.passes.Observe(took, c.opt.Resync, end); n > 0 {
		c.log.Warn("reconcile pass overran the resync interval", "took", took.Round(time.Millisecond),
			"resync_interval", c.opt.Resync, "overruns", n)
	}
}

// waitForPass waits for a reason to run the next pass: a change seen by a watch
// (kick), the resync tick, a decision's timer, or, after failed passes in a
// row, only the retry with backoff (or the resync). It returns false when ctx
// ends.
func (c *Coordinator) waitForPass(ctx context.Context, kick <-chan struct{}, resync <-chan time.Time, failed int) bool {
	now := c.now()
	c.mu.Lock()
	next := c.recheck // a decision's deadline or backoff (phase.Decision.RecheckAt)
	c.mu.Unlock()
	if t := c.admitRecheck; t.After(now) && (next.IsZero() || t.Before(next)) {
		next = t // admission may decide otherwise: a settle time ends, a hold is looked at again
	}
	if t := c.freezeRecheck; t.After(now) && (next.IsZero() || t.Before(next)) {
		next = t // a freeze starts or ends: notified and shown at once (sideoutputs.go)
	}
	if t := c.alerts.Next(); t.After(now) && (next.IsZero() || t.Before(next)) {
		next = t // a rollout held by alerts asks again (admitreads.go)
	}
	if failed > 0 {
		// After failed passes in a row the next waits for its backoff, and
		// no sooner: a change a watch saw (a kick, kept for that pass) or a
		// decision's timer would run a pass that fails the same way now
		// (Nomad refusing or unreachable), each costing Nomad the requests
		// it made before failing.
		next, kick = now.Add(policy.Backoff(time.Second, c.opt.Resync, failed)), nil
	}
	var timer <-chan time.Time
	if !next.IsZero() {
		tm := time.NewTimer(next.Sub(now))
		defer tm.Stop()
		timer = tm.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-kick:
	case <-resync:
	case <-timer:
	}
	return true
}

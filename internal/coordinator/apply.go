package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/haltkeep"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/stopjobs"
	"github.com/rollboot/rollboot/internal/store"
)

// apply carries out a decision. Steps that take a node out of service (a drain)
// run after the plan that records them is stored; steps that give it back
// (cancel a drain, restore eligibility) run before the plan that forgets them. So
// a crash at any point leaves a state from which the next reconcile finishes the
// job. In order:
//  1. give the node back: cancel the drain, restore eligibility;
//  2. close the cycle: clear the manual request, write the history record;
//  3. store the plan;
//  4. take the node out: cordon it (phase/cordon.go), hand the leadership
//     over, start the drain;
//  5. forget a release that was carried out.
//
// Each step runs only if the ones before it succeeded. A rejoin closed in the
// pass that gives its node back stores no plan between (rejoinTogether).
func (c *Coordinator) apply(ctx context.Context, in phase.Input, d phase.Decision) error {
	log := c.hostLog(d)
	if err := c.giveBack(ctx, in, d, log); err != nil {
		return err
	}
	if err := c.closeCycle(ctx, d); err != nil {
		return err
	}
	if err := c.storePlan(ctx, in, d, log); err != nil {
		return err
	}
	c.alertUnhealthy(in, d, log)
	if err := c.takeOut(ctx, in, d, log); err != nil {
		return err
	}
	if d.ClearRelease {
		// After the plan: a release is forgotten only once it is carried out.
		if err := c.clearControl(ctx, d.Plan.Host, false, true); err != nil {
			return err
		}
	}
	return nil
}

// giveBack cancels the drain and restores eligibility. Before the plan that
// forgets them: a crash in between leaves a plan that still gives the node back.
func (c *Coordinator) giveBack(ctx context.Context, in phase.Input, d phase.Decision, log *slog.Logger) error {
	if in.Node == nil {
		return nil
	}
	w := (&api.WriteOptions{}).WithContext(ctx)
	if d.CancelDrain {
		if err := election.CheckLease(ctx); err != nil {
			return fmt.Errorf("cancel drain of node %s: %w", in.Node.ID, err)
		}
		if _, err := c.opt.Nodes.UpdateDrainOpts(in.Node.ID, &api.DrainOptions{DrainSpec: nil, MarkEligible: d.MarkEligible}, w); err != nil {
			return fmt.Errorf("cancel drain of node %s: %w", in.Node.ID, err)
		}
		log.Info("drain canceled", "node_id", in.Node.ID, "mark_eligible", d.MarkEligible)
	}
	if d.SetEligible {
		if err := election.CheckLease(ctx); err != nil {
			return fmt.Errorf("restore eligibility of node %s: %w", in.Node.ID, err)
		}
		if _, err := c.opt.Nodes.ToggleEligibility(in.Node.ID, true, w); err != nil {
			return fmt.Errorf("restore eligibility of node %s: %w", in.Node.ID, err)
		}
		log.Info("eligibility restored", "node_id", in.Node.ID)
	}
	return nil
}

// closeCycle clears the manual request and writes the history record of a
// finished cycle, before the plan forgets the cycle.
func (c *Coordinator) closeCycle(ctx context.Context, d phase.Decision) error {
	if d.ClearRequest {
		// Before the plan says the cycle is over, so that whoever sees it over
		// also sees the request gone; a crash in between only drops a request
		// whose reboot is done.
		if err := c.clearControl(ctx, d.Plan.Host, true, false); err != nil {
			return err
		}
	}
	if !d.ClearApproval.IsZero() {
		// Before the plan forgets the cycle, as the request: the approval is
		// consumed by the cycle it let start.
		if err := c.consumeApproval(ctx, d.Plan.Host, d.ClearApproval); err != nil {
			return err
		}
	}
	if d.History != nil {
		// The record's path is fixed by the cycle, so writing it again after a
		// crash or an error is harmless. The oldest records are pruned once the
		// pass's writes are done (pruneHistory), not in each close's way.
		if err := c.opt.Store.WriteHistory(ctx, *d.History); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		c.historyWritten.Store(true)
		c.metrics.State.Finished(*d.History)
		c.handOffs.SlotFreed(d.History.Group, d.History.Finished)
	}
	return nil
}

// pruneHistory deletes the history records beyond coordinator.history_size
// once a pass that wrote some has carried out its writes: one list of the
// history when it must be listed, instead of one per close of a wave, and the
// deletes side by side, after the hand-out rather than between each close's
// history record and its plan. A prune that failed is tried again by the
// next pass.
func (c *Coordinator) pruneHistory(ctx context.Context) error {
	if c.opt.HistorySize <= 0 || !c.historyWritten.Swap(false) {
		return nil
	}
	wctx, cancel := c.stepContext(ctx)
	defer cancel()
	if err := c.opt.Store.PruneHistory(wctx, c.opt.HistorySize); err != nil {
		c.historyWritten.Store(true) // the next pass tries again
		return fmt.Errorf("prune the history to %d records: %w", c.opt.HistorySize, err)
	}
	return nil
}

// storePlan writes the plan with check-and-set, and keeps it as the cache.
func (c *Coordinator) storePlan(ctx context.Context, in phase.Input, d phase.Decision, log *slog.Logger) error {
	if d.DeletePlan {
		return c.deletePlan(ctx, in.Plan, log)
	}
	if !d.Write {
		return nil
	}
	p := d.Plan
	p.ModifyIndex = in.Plan.ModifyIndex
	idx, err := c.opt.Store.PutPlan(ctx, p)
	if errors.Is(err, store.ErrConflict) {
		// Another coordinator wrote: forget our cache and decide again.
		c.mu.Lock()
		c.plans = nil
		c.mu.Unlock()
		return err
	}
	if err != nil {
		return err
	}
	p.ModifyIndex = idx
	c.mu.Lock()
	if c.plans != nil {
		c.plans[p.Host] = p
		c.plansGen++
	}
	c.mu.Unlock()
	logEvent(log, d)
	return nil
}

// hostLog is the logger of what carrying d out does.
func (c *Coordinator) hostLog(d phase.Decision) *slog.Logger {
	return c.log.With("host", d.Plan.Host, "phase", d.Plan.Phase, "group", d.Plan.Group)
}

// logEvent logs what carrying d out did, if it says (phase.Decision.Event).
func logEvent(log *slog.Logger, d phase.Decision) {
	switch {
	case d.Event != "" && d.Plan.NoCordon != "":
		log.Info(d.Event, "reason", d.Plan.Reason, "last_error", d.Plan.LastError, "waiting", d.Plan.Waiting, "no_cordon", d.Plan.NoCordon)
	case d.Event != "":
		log.Info(d.Event, "reason", d.Plan.Reason, "last_error", d.Plan.LastError, "waiting", d.Plan.Waiting)
	}
}

// takeOut hands the leadership over and starts the drain, after the plan that
// records the grant is stored: a crash in between leaves a plan that says
// draining, whose drain the next pass issues again.
func (c *Coordinator) takeOut(ctx context.Context, in phase.Input, d phase.Decision, log *slog.Logger) error {
	if err := c.cordon(ctx, in, d, log); err != nil {
		return err
	}
	for _, product := range d.HandOver {
		if err := election.CheckLease(ctx); err != nil {
			return fmt.Errorf("hand over the %s leadership: %w", product, err)
		}
		if err := c.handOver(ctx, in.Host, product); err != nil {
			return err
		}
	}
	if !d.StartDrain || in.Node == nil {
		return nil
	}
	p := d.Plan
	opts := phase.NomadDrain(in, p)
	w := (&api.WriteOptions{}).WithContext(ctx)
	if err := stopjobs.Stop(ctx, c.opt.Nodes, c.opt.Allocs, in.Node.ID, in.Drain.StopJobs, log); err != nil {
		return err
	}
	if err := election.CheckLease(ctx); err != nil {
		return fmt.Errorf("drain node %s: %w", in.Node.ID, err)
	}
	if _, err := c.opt.Nodes.UpdateDrainOpts(in.Node.ID, opts, w); err != nil {
		return fmt.Errorf("drain node %s: %w", in.Node.ID, err)
	}
	log.Info("drain started", "node_id", in.Node.ID, "grant", p.GrantID)
	if in.Plan.Phase == store.PhasePending { // the grant of this pass, not a drain issued again
		c.handOffs.DrainStarted(in.Group, in.Plan.RequestedAt, in.Now)
	}
	return nil
}

// cordon marks the node of a host next in line ineligible, after the plan
// that records the cordon is stored: a crash in between leaves a plan whose
// cordon the next pass carries out or gives back (phase/cordon.go).
func (c *Coordinator) cordon(ctx context.Context, in phase.Input, d phase.Decision, log *slog.Logger) error {
	if !d.Cordon || in.Node == nil {
		return nil
	}
	if err := election.CheckLease(ctx); err != nil {
		return fmt.Errorf("cordon node %s: %w", in.Node.ID, err)
	}
	if _, err := c.opt.Nodes.ToggleEligibility(in.Node.ID, false, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("cordon node %s: %w", in.Node.ID, err)
	}
	c.metrics.Cordons.Inc()
	log.Info("node cordoned: next in line", "node_id", in.Node.ID)
	return nil
}

// clearControl removes a host's manual request and/or release from the control
// state.
func (c *Coordinator) clearControl(ctx context.Context, host string, request, release bool) error {
	err := c.updateControl(ctx, func(ctl *store.Control) error {
		if request {
			delete(ctl.Requests, host)
		}
		if release {
			delete(ctl.Releases, host)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update control: %w", err)
	}
	return nil
}

// deletePlan deletes the idle plan of a host that is gone, with check-and-set,
// and from the cache.
func (c *Coordinator) deletePlan(ctx context.Context, p store.Plan, log *slog.Logger) error {
	err := c.opt.Store.DeletePlan(ctx, p)
	if errors.Is(err, store.ErrConflict) {
		c.mu.Lock()
		c.plans = nil // another coordinator wrote: read them again
		c.mu.Unlock()
		return err
	}
	if err != nil {
		return fmt.Errorf("delete the plan of %s: %w", p.Host, err)
	}
	c.mu.Lock()
	if c.plans != nil {
		delete(c.plans, p.Host)
		c.plansGen++
	}
	c.mu.Unlock()
	log.Info("plan deleted: the host has no record and no Nomad node any more")
	return nil
}

// clearCancel removes a host's cancel, if it is still the one given.
func (c *Coordinator) clearCancel(ctx context.Context, host string, at time.Time) error {
	err := c.updateControl(ctx, func(ctl *store.Control) error {
		if ctl.Cancels[host].Equal(at) {
			delete(ctl.Cancels, host)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownVersion) {
		// A newer rollboot wrote the host's entries: they stay as they are, read
		// as a cancel (the safe way), and status lists them under control
		// problems. Failing here would fail every pass of the whole fleet.
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the cancel of %s: %w", host, err)
	}
	return nil
}

// consumeApproval removes the operator's approval of host that the cycle
// ending used (valid until until), if it is still that one: a new approval
// given since stays.
func (c *Coordinator) consumeApproval(ctx context.Context, host string, until time.Time) error {
	err := c.updateControl(ctx, func(ctl *store.Control) error {
		if a, ok := ctl.Approvals[host]; ok && a.Until.Equal(until) {
			delete(ctl.Approvals, host)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownVersion) {
		return nil // a newer rollboot's entries stay as they are (clearCancel)
	}
	if err != nil {
		return fmt.Errorf("remove the approval of %s: %w", host, err)
	}
	return nil
}

// No pass waits for ever. Every request to Nomad has a deadline of its own when
// the client is built by package deadline, but the coordinator does not rely on
// its client for that: each step of a pass runs under a context that ends after
// StepTimeout, so a request that a server accepts and never answers (a stuck
// server, a half-open connection behind a load balancer) ends with its step,
// whatever transport sent it. The steps are reading the snapshot (observe, and
// the system jobs of the hosts admitted), and carrying out one host's decision:
// a host whose request hangs does not hold up the others in the same pass. A
// step cut short fails the pass, which is retried with backoff (wake.go); apply
// is crash-safe, so a step abandoned half way is finished by a later pass.

// DefaultStepTimeout bounds one step of a pass when Options.StepTimeout is 0. It
// is well above what a step takes when Nomad answers: a request's own deadline
// (10 s), and a leadership hand-over (30 s per product) for a host's decision.
const DefaultStepTimeout = 2 * time.Minute

func (c *Coordinator) stepTimeout() time.Duration {
	if c.opt.StepTimeout > 0 {
		return c.opt.StepTimeout
	}
	return DefaultStepTimeout
}

// stepContext is the context of one step of a pass.
func (c *Coordinator) stepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.stepTimeout())
}

// errStepTimeout marks a step of a pass that ran out of its time.
var errStepTimeout = errors.New("step of the reconcile pass timed out: a request to Nomad was not answered")

// stepFailed names the step's timeout in err when that is why it failed (and
// not the end of the pass's own context: the coordinator stopping), and counts
// it.
func (c *Coordinator) stepFailed(step, parent context.Context, err error) error {
	if step.Err() != nil && parent.Err() == nil {
		c.metrics.StepTimeouts.Inc()
		return fmt.Errorf("%w after %s: %w", errStepTimeout, c.stepTimeout(), err)
	}
	return err
}

// carryOutBounded carries one host's decision out within its own step. A
// decision that writes nothing costs nothing: most hosts, most passes.
func (c *Coordinator) carryOutBounded(ctx context.Context, in phase.Input, d phase.Decision) error {
	if !d.Acts() {
		return nil
	}
	hctx, cancel := c.stepContext(ctx)
	defer cancel()
	if err := c.carryOut(hctx, in, d); err != nil {
		return c.stepFailed(hctx, ctx, err)
	}
	return nil
}

// PlanWriteParallelism bounds the plans a pass stores at once. On a patch day
// one pass turns every host with a need pending, a write per host, and when a
// wave of cycles ends one pass closes dozens, each close a few writes one after
// the other: one after the other they took about a second per thousand hosts.
// With the reads started beside them (allocsource.ReadAheadParallelism) they
// keep 32 requests in flight, as do a hand-out's grants (handOutParallelism),
// sent once the pass's other writes and reads are done: under the 100
// connections Nomad accepts from one client beside the watches, as a new
// leader's 64 reads are (store.ReadParallelism).
const (
	PlanWriteParallelism = 24
	handOutParallelism   = 32
)

// pendingWrite is a decision carried out with the others of its pass
// (phase.Decision.StoredTogether).
type pendingWrite struct {
	in phase.Input
	d  phase.Decision
	// rejoin is the pass's snapshot when d restores a rejoining host's
	// eligibility: once it is carried out, the pass decides again for the host
	// (rejoinNow); nil for any other decision.
	rejoin *snapshot
	// done, when set, is called once the decision was carried out, with its
	// error (readAhead).
	done func(err error)
}

// storePlans carries the decisions of a pass stored together out, at most
// limit at a time, each within its own step as any other decision
// (carryOutBounded). It returns every error, joined.
func (c *Coordinator) storePlans(ctx context.Context, writes []pendingWrite, limit int) error {
	errs := make([]error, len(writes)) // each write's, at its index
	parallel.Each(len(writes), limit, nil, func(i int) {
		w := writes[i]
		var err error
		if w.rejoin != nil {
			err = c.rejoinTogether(ctx, w.rejoin, w.in, w.d)
		} else {
			err = c.carryOutBounded(ctx, w.in, w.d)
		}
		if w.done != nil {
			w.done(err)
		}
		errs[i] = err
	})
	return errors.Join(errs...)
}

// Closing a cycle in the pass that restores its node's eligibility, and why it
// is as safe as the pass it saves: docs/architecture.md, "Crash safety", step 4.

// rejoinTogether carries out d, which restores a rejoining host's eligibility
// (phase.EligibleAgain), and decides again for the host at once (rejoinNow).
// d's plan is stored only when that second decision leaves the cycle open
// (deferredRejoin): a close's idle plan is then the pass's only write of it.
func (c *Coordinator) rejoinTogether(ctx context.Context, s *snapshot, in phase.Input, d phase.Decision) error {
	first, p, deferred := d, d.Plan, deferredRejoin(d)
	if deferred {
		first.Write, first.Event = false, ""
	}
	if err := c.carryOutBounded(ctx, in, first); err != nil {
		return err
	}
	if deferred {
		logEvent(c.hostLog(d), d)           // the node is given back: what d says happened
		p.ModifyIndex = in.Plan.ModifyIndex // the stored plan's: the next write's check-and-set
	} else {
		c.mu.Lock()
		p = c.plans[in.Plan.Host] // as d stored it (none after a conflict)
		c.mu.Unlock()
	}
	if closed, err := c.rejoinNow(ctx, s, in, p); closed || err != nil || !deferred {
		return err
	}
	rest := d
	rest.SetEligible, rest.CancelDrain, rest.MarkEligible, rest.Event = false, false, false, ""
	return c.carryOutBounded(ctx, in, rest)
}

// deferredRejoin reports whether d's plan may wait for the pass's second
// decision for the host: d does nothing but give the node back and store it.
func deferredRejoin(d phase.Decision) bool {
	return d.Write && d.History == nil && d.ClearApproval.IsZero() && d.Unhealthy == "" && d.Failure == ""
}

// rejoinNow decides again, on its plan p (its ModifyIndex the stored one), for
// a host whose eligibility was just restored, with the node as the write left
// it and its health read after the write, and carries the decision out if it
// closes the cycle; it reports whether it did. s, the pass's snapshot, is only
// read: the pass's writes run side by side.
func (c *Coordinator) rejoinNow(ctx context.Context, s *snapshot, in phase.Input, p store.Plan) (closed bool, err error) {
	if p.Phase != store.PhaseRejoining {
		return false, nil
	}
	node := *in.Node // phase.EligibleAgain: the decision wrote to it
	node.Eligible, node.Draining = true, false
	in.Node, in.Plan, in.Now = &node, p, c.now()
	if phase.AwaitsReport(in.Host, p, true) {
		return false, nil // nothing read before the agent's report (stepRejoining)
	}
	rctx, cancel := c.stepContext(ctx)
	in.Health = c.healthNow(rctx, s, p, planGroup(p, in.Group), node.ID) // a read that failed holds the host
	cancel()
	d2 := phase.Step(in)
	c.noteRecheck(d2)
	if !d2.FreesSlot(in) || !d2.GivesBackOnly() || d2.Failure != "" {
		// A failed cycle is recorded before it is closed (recordFailures): the
		// next pass does both.
		return false, nil
	}
	if err := c.carryOutBounded(ctx, in, d2); err != nil {
		return false, err
	}
	return true, nil
}

// healthNow reads the host's workloads, and its Consul checks when its group
// waits for them, straight from Nomad and Consul: neither the watch's
// allocations nor the pass's were read after the eligibility write. The read
// is the pass's (allocsource.Source.Noted): when the host still waits for its
// workloads, its allocation watch starts past it, instead of reading the same
// allocations again first.
func (c *Coordinator) healthNow(ctx context.Context, s *snapshot, p store.Plan, group, nodeID string) *rejoin.Observed {
	if !phase.WaitsForHealth(p) {
		return nil
	}
	o := &rejoin.Observed{}
	allocs, meta, err := c.opt.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		o.AllocsErr = fmt.Errorf("cannot read the allocations of node %s: %w", nodeID, err)
	} else {
		c.allocs.Noted(nodeID, meta, allocs)
		o.Allocs = rejoin.NomadAllocs(allocs)
	}
	c.readChecks(ctx, s, o, group, nodeID)
	return o
}

// recordFailures stores the failures of the decisions in failing, with the
// halts they cause (package haltkeep), and returns the decisions that may be
// carried out now: all of them once the write succeeded, none when it failed
// (the next pass decides them again). s's halt state is the one written.
func (c *Coordinator) recordFailures(ctx context.Context, s *snapshot, failing []pendingWrite) ([]pendingWrite, error) {
	if len(failing) == 0 {
		return nil, nil
	}
	fs := make([]policy.Failure, 0, len(failing))
	for _, w := range failing {
		fs = append(fs, haltkeep.FailureOf(w.in, w.d, planGroup(w.in.Plan, w.in.Group)))
	}
	wctx, cancel := c.stepContext(ctx)
	defer cancel()
	var ok bool
	err := withHalts(s, func(p *haltkeep.Pass) (err error) {
		ok, err = c.halts.Record(wctx, c.seen.halts.Gen, p, c.opt.FailureBudgets, fs, s.now)
		return err
	})
	if !ok {
		return nil, err
	}
	return failing, nil
}

// Halt halts group for reason, naming the hosts whose cycles made it (a
// canary that failed, say), as the failure budget does: no new drain of the
// group starts until `rollboot resume -group G`. A group already halted stays
// as it is. Called from the pass's goroutine, with the pass's snapshot.
func (c *Coordinator) Halt(ctx context.Context, s *snapshot, group, reason string, hosts []policy.Failure) error {
	return withHalts(s, func(p *haltkeep.Pass) error {
		return c.halts.Halt(ctx, c.seen.halts.Gen, p, group, reason, hosts, s.now)
	})
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/phase"
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
//  4. take the node out: hand the leadership over, start the drain;
//  5. forget a release that was carried out.
//
// Each step runs only if the ones before it succeeded.
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
	if d.History != nil {
		// The record's path is fixed by the cycle, so writing it again after a
		// crash or an error is harmless.
		if err := c.opt.Store.AppendHistory(ctx, *d.History, c.opt.HistorySize); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		c.metrics.state.Finished(*d.History)
		c.slotFreed(d.History.Group, d.History.Finished)
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
	if d.Event != "" {
		log.Info(d.Event, "reason", d.Plan.Reason, "last_error", d.Plan.LastError, "waiting", d.Plan.Waiting)
	}
}

// takeOut hands the leadership over and starts the drain, after the plan that
// records the grant is stored: a crash in between leaves a plan that says
// draining, whose drain the next pass issues again.
func (c *Coordinator) takeOut(ctx context.Context, in phase.Input, d phase.Decision, log *slog.Logger) error {
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
	opts := &api.DrainOptions{DrainSpec: phase.DrainSpec(in), MarkEligible: false, Meta: map[string]string{
		metaGrant: p.GrantID,
		metaBy:    "rollboot",
		// What a drain left behind needs to be given back (staleDrain).
		metaEligibleBefore: strconv.FormatBool(p.EligibleBefore),
		metaMessage:        "rollboot: reboot of " + p.Host + " (" + p.Reason + ")",
	}}
	w := (&api.WriteOptions{}).WithContext(ctx)
	if err := c.stopJobs(ctx, in, log); err != nil {
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
		c.drainStarted(in.Group, in.Plan.RequestedAt, in.Now)
	}
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

package coordinator

import (
	"context"
	"time"

	"github.com/rollboot/rollboot/internal/enforcement"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/policykeep"
	"github.com/rollboot/rollboot/internal/rules"
)

// The stored policy. With Options.Policy set, the coordinator decides only with
// the rollout policy stored in the cluster: each pass reads it first (a watch
// wakes the loop when it changes; while that watch is live and saw no change
// since the last read, a pass keeps what that read said instead of reading it
// again) and takes its rules in place of the options' groups, timings and
// rules. With no stored policy the source gives the safe
// default rules (version 0). A stored policy that cannot be used is never
// replaced by defaults: no new reboot starts, every pending host waits with the
// problem as its reason, and the hosts already out of service finish their
// cycle with the last good rules (the options' own, the safe default, when there
// were none).

// PolicySource reads the stored rollout policy.
type PolicySource interface {
	// Rules reads the stored policy and compiles it: the safe default rules
	// (Version 0) when none is stored, an *InvalidPolicyError when one is
	// stored that cannot be used, any other error when it cannot be read.
	Rules(ctx context.Context) (rules.Rules, error)
	// Watch blocks until the stored policy changes past index (with index >
	// 0) or wait passes, and returns its index.
	Watch(ctx context.Context, index uint64, wait time.Duration) (uint64, error)
}

// InvalidPolicyError is a stored policy that cannot be used (package
// policykeep).
type InvalidPolicyError = policykeep.InvalidError

// policyState is the coordinator's view of the stored policy.
type policyState struct {
	// keep: the version of the rules in c.opt, or why the stored policy
	// cannot be used (package policykeep).
	keep policykeep.Keeper
	// record: the enforcement record of this coordinator (package
	// enforcement).
	record enforcement.Publisher
}

// setRules puts the stored policy's rules r in place of the rules in force.
func (c *Coordinator) setRules(r rules.Rules) {
	c.opt.Rules = r
	c.opt.Rules.SetDefaults()
}

// refreshPolicy reads the stored policy at the start of a pass, takes its rules
// when it can be used, and says loudly when it cannot. An error means it could
// not be read at all: the pass does nothing.
func (c *Coordinator) refreshPolicy(ctx context.Context) error {
	if c.opt.Policy == nil {
		return nil
	}
	w := c.seen.policy
	r, take, err := policykeep.Refresh(ctx, &c.policy.keep, w.Gen, w.Live, c.opt.Policy.Rules, func(r rules.Rules) int { return r.Version })
	if err != nil {
		return err
	}
	if take {
		c.setRules(r)
	}
	return c.policyEnforced(ctx)
}

// policyEnforced records that the policy as last read is enforced: in the
// metrics, and in the enforcement record.
func (c *Coordinator) policyEnforced(ctx context.Context) error {
	c.metrics.Policy(c.policy.keep.Version, c.policy.keep.Problem != "")
	if err := c.publishEnforcement(ctx); err != nil {
		// Only what status shows is late: the next pass writes it again.
		c.log.Warn("cannot record the enforced policy for rollboot status", "err", err)
	}
	return nil
}

// enforced is what the enforcement record says this coordinator enforces.
func (c *Coordinator) enforced() enforcement.Enforced {
	return enforcement.Enforced{PolicyVersion: c.policy.keep.Version, PolicyProblem: c.policy.keep.Problem, Nodes: c.seen.nodeWatch}
}

// publishEnforcement writes who leads and what it enforces when that changed
// since it last wrote it in this term.
func (c *Coordinator) publishEnforcement(ctx context.Context) error {
	return c.policy.record.Publish(ctx, c.enforced())
}

// publishSlots records each group's slot limit, as admission saw the groups
// in this pass, in the enforcement record when it changed. A coordinator
// without a stored policy (c.opt.Policy nil) keeps no enforcement record.
func (c *Coordinator) publishSlots(ctx context.Context, groups []policy.GroupStatus) {
	if c.opt.Policy == nil {
		return
	}
	c.policy.record.Slots(ctx, groups, c.enforced())
}

// policyHold is why every new start is held: the stored policy cannot be used.
func (c *Coordinator) policyHold() phase.WaitReason {
	if c.policy.keep.Problem == "" {
		return phase.WaitReason{}
	}
	return phase.WaitFor(phase.WaitPolicyInvalid, c.policy.keep.Problem)
}

// watchPolicy wakes the reconcile loop when the stored policy changes.
func (c *Coordinator) watchPolicy(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Policy.Watch(ctx, idx, 5*time.Minute)
	c.mail.update(func(a *answers) {
		if err != nil {
			a.policy.Failed() // passes read it themselves
			return
		}
		a.policy.Answered(n, struct{}{}, n != idx) // a pass reads it again after a change
	})
	return n, err
}

// endTerm forgets what this term published and read: the next term writes the
// enforcement record again (another coordinator may have led in between).
func (c *Coordinator) endTerm() {
	c.policy.record.EndTerm()
	c.waves.EndTerm()       // read again in the next term
	c.policy.keep.EndTerm() // read again in the next term
	c.metrics.Policy(0, false)
	c.metrics.NodeBlocking.Set(0)
	c.alerts.Forget()
	c.halts.EndTerm()
	c.side.Forget() // the next term's notifier and publisher start afresh
}

package phase

import (
	"fmt"
	"slices"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// agentReport acts on what the agent says about the current grant while its host
// has not gone down (same boot ID, node ready): a failed attempt, or a hold at
// its final go/no-go. ok is false when neither applies and the phase machine
// carries on as usual.
func agentReport(in Input, d Decision) (Decision, bool) {
	p := d.Plan
	h := in.Host
	up := h != nil && h.BootID == p.BootIDAtGrant && rebootSeen(in, p) == "" &&
		(in.Node == nil || in.Node.Status == "ready")
	switch {
	case up && h.Failure != nil && h.Failure.Grant == p.GrantID:
		return notRebooted(in, d, *h.Failure), true
	case up && h.HoldReason != "" && h.RebootingGrant == p.GrantID && p.Phase == store.PhaseRebooting:
		// The agent is alive and holds the reboot (a quorum gate closed, the
		// node not as drained as it should be): the slot stays taken, and the
		// host is not stuck while it says why it waits, up to the time a
		// reboot is given to come back.
		if p.Held && in.Timing.RejoinTimeout > 0 && in.Now.Sub(p.PhaseSince) >= in.Timing.RejoinTimeout {
			return heldTooLong(in, d, h.HoldReason), true
		}
		if !p.Held {
			d.Plan.Held, d.Write, d.Event = true, true, "the agent holds the reboot" // why: in Waiting
		}
		d.Waiting = WaitFor(WaitAgentHolds, h.HoldReason)
		return d, true
	case p.Held:
		// The hold ended (the agent went ahead, or the host went down): the
		// reboot starts now, so its time to come back counts from now.
		d.Plan.Held, d.Plan.PhaseSince = false, in.Now
		d.Write, d.Event = true, "the agent ended its hold"
		d.Waiting = WaitFor(WaitRebooting, "")
		return d, true
	}
	return d, false
}

// notRebooted handles a host that provably did not reboot: its agent reports a
// failed pre-reboot hook or reboot command, its boot ID is the one at grant and its
// node is ready. It is not stuck: the drain is undone (eligibility restored if the
// node was eligible before), the failed attempt is recorded in the history, and
// the host retries after a backoff with a new grant.
func notRebooted(in Input, d Decision, f store.RebootFailure) Decision {
	p := d.Plan
	d = giveNodeBack(in, d)
	h := history(p, in, "failed")
	h.Error = f.String()
	d.History = h
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = "the host did not reboot: " + f.String()
	d.Plan.Held = false
	d.Write, d.Event = true, "reboot failed on the host" // how: in LastError
	d.Failure = policy.FailRebootFailed
	return d
}

// giveNodeBack undoes the drain of a host that did not reboot: the drain
// cancelled, or eligibility restored, as the node was before the grant.
func giveNodeBack(in Input, d Decision) Decision {
	if in.Node == nil {
		return d
	}
	switch {
	case in.Node.Draining:
		d.CancelDrain, d.MarkEligible = true, d.Plan.EligibleBefore
	case d.Plan.EligibleBefore && !in.Node.Eligible:
		d.SetEligible = true
	}
	return d
}

// heldTooLong ends the attempt of a host whose agent has held its reboot at
// the final go/no-go for rejoin_timeout, the time a reboot is given to come
// back. Some holds never clear by themselves (the node's events trimmed, so
// the agent cannot tell the node stayed drained; a quorum gate that waits for
// a server an operator must mend): waiting on would keep the node out of
// service and the group's slot taken for good. So, as for a failed reboot, the
// node is given back, a history record "held" says what the agent waited for,
// the drain_aborted notification carries it, the slot is freed, and the host
// backs off (the backoff growing with the attempts) before it is queued again,
// with a new grant and a new drain. The agent sees its grant withdrawn and
// stops holding; its final go/no-go refuses a node that is eligible again, so
// a reboot cannot slip in after the node was given back.
func heldTooLong(in Input, d Decision, hold string) Decision {
	p := d.Plan
	d = giveNodeBack(in, d)
	h := history(p, in, "held")
	h.Error = fmt.Sprintf("the agent held the reboot for %s: %s", in.Timing.RejoinTimeout, hold)
	d.History = h
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = "attempt ended: " + h.Error
	d.Plan.Held = false
	d.Write, d.Event = true, "the agent held the reboot too long" // why: in LastError
	return d
}

// AgentWouldBeLost says why a drain must not start (zero when it may): the host's
// agent runs as a Nomad system job that does not run on the node now (an operator
// drain without IgnoreSystemJobs stopped it, say), so after the drain nobody
// would be there to reboot the host and report back.
func AgentWouldBeLost(in Input) WaitReason {
	if in.Node == nil || in.Host == nil || in.Host.AgentJob == "" || slices.Contains(in.SystemJobs, in.Host.AgentJob) {
		return WaitReason{}
	}
	return WaitFor(WaitAgentNotOnNode, in.Host.AgentJob)
}

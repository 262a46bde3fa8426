package phase

import (
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Operator actions mid-cycle (docs/architecture.md, "An operator's hand in a
// cycle"). Between its grant and its reboot a host's node is rollboot's: drained
// for the grant and kept ineligible until the agent reboots it. An operator who
// makes that node eligible again, or drains it themselves, takes it back: Nomad
// may place work on an eligible node, so the agent's final go/no-go refuses to
// reboot it, and a node under someone else's drain is theirs. Waiting for the
// operator to undo it would hold the group's slot for as long as they do not
// (for good, in the fault runs that found it). So the attempt ends on the
// operator's word: a history record "interrupted" says what they did, the
// drain_aborted notification carries it, the slot is freed, the node is left as
// the operator set it, and the host backs off and is queued again while it
// still needs a reboot: a new attempt drains the node again, and a pending host
// on a node someone else drained waits for it to be given back (NodeHold).
//
// An eligibility change that the operator undid before the coordinator saw it
// (eligible, then ineligible again, no drain) leaves the node out of service:
// the attempt goes on with a new drain of the same grant (drainAgain), which
// moves whatever Nomad placed meanwhile.

// takenBack says how the operator took the node of a host between its grant
// and its reboot back ("" when they did not): made it eligible again, or
// drained it themselves.
func takenBack(in Input, p store.Plan) string {
	n := in.Node
	if n == nil || rebootSeen(in, p) != "" {
		return "" // rebooted: the rejoin gives the node back
	}
	// A drain that names no grant of rollboot's is someone else's; begun
	// since the grant (Nomad dates drains to the second, by its own clock), it
	// is not one the grant found: NodeHold holds a host on such a node.
	// The node's own drain on shutdown (drain_on_shutdown) is the reboot
	// under way, not an operator's: it finds nothing to move, and the
	// rejoin gives the node back as for rollboot's own drain (selfdrain.go).
	foreign := n.DrainGrant == "" && n.DrainStatus != "" && !n.DrainBySelf
	switch {
	case foreign && n.Draining:
		return "the node was drained by someone else during the cycle"
	case foreign && !n.DrainStartedAt.Before(p.Timeline[store.PhaseDraining].Truncate(time.Second)):
		return "the node was drained by someone else during the cycle"
	case n.Eligible && !n.Draining && n.DrainGrant == p.GrantID && n.DrainStatus == "complete":
		return "the node was made eligible again during the cycle: Nomad may place work on it"
	}
	return ""
}

// interrupted ends the attempt of a host whose node the operator took back
// (takenBack says how): history, the slot freed, the host backing off before
// it is queued again. Nothing is done to the node.
func interrupted(in Input, d Decision, why string) Decision {
	p := d.Plan
	h := history(p, in, "interrupted")
	h.Error = why
	d.History = h
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = interruptedPrefix + why
	d.Plan.Held = false
	d.Write, d.Event = true, "attempt interrupted by an operator" // why: in LastError
	return d
}

// interruptedPrefix begins the LastError of an attempt that interrupted ended.
const interruptedPrefix = "attempt interrupted: "

// rebootedAnyway records the reboot of a host whose attempt was interrupted
// after its drain completed, and which rebooted all the same: the operator's
// eligibility change can land between the agent's final go/no-go and the
// reboot itself, too late to stop it, and the coordinator may see it before it
// sees the agent's announcement (takenBack comes first in stepDrained). The
// plan still names the interrupted grant (backing off, or pending again) and
// the host is back with a boot other than the one granted, as Nomad backs it
// (rebootSeen: its node's client started again since the drain completed; a
// record's word alone is a claim). The reboot happened, so its cycle ends
// "rebooted", saying how the attempt had ended; left as the interruption, the
// host would go idle (its need cleared by the reboot) with no rebooted cycle
// in its history. Nothing is done to the node: the operator set it.
func rebootedAnyway(in Input, d Decision) (Decision, bool) {
	p := d.Plan
	if !interruptedAfterDrain(p) || reportedBack(in.Host, p) == "" {
		return d, false
	}
	if rebootSeen(in, p) == "" {
		// The record says the host is back; its node does not show it yet (the
		// agent's report can come before the client's registration): wait for
		// Nomad's word, up to the rejoin timeout, rather than forget the
		// reboot because the record's new boot also cleared the need.
		if in.Now.Sub(p.PhaseSince) < in.Timing.RejoinTimeout {
			d.Waiting = WaitFor(WaitRebooting, "the host reports a new boot; waiting for its node to show the reboot")
			return d, true
		}
		return d, false
	}
	d = backInService(in, d, p)
	d.History.Error = "the reboot went ahead after the " + p.LastError
	d.Event = "host rebooted after its attempt was interrupted"
	return d, true
}

// interruptedAfterDrain reports whether p names an attempt an operator
// interrupted after its drain completed (rebootedAnyway).
func interruptedAfterDrain(p store.Plan) bool {
	return p.GrantID != "" && p.BootIDAtGrant != "" && !drainedAt(p).IsZero() && strings.HasPrefix(p.LastError, interruptedPrefix)
}

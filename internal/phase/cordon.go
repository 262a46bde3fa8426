package phase

import (
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// The cordon of a host next in line (node_meta.cordon_next): its node is
// marked ineligible before its drain, so that the allocations the drains
// before it move do not land there and move twice (Kured's
// --prefer-no-schedule-taint). Admission says which pending hosts are to be
// cordoned (Input.Cordon) and why one next in line is not (Input.NoCordon),
// from the plans and Nomad's nodes and allocations alone. The plan records
// the cordon before the node is touched (Decision.Cordon runs after the plan
// is stored), and forgets it only after the node is given back (SetEligible
// runs before): a coordinator that stops in between leaves a plan from which
// the next one finishes or undoes it. Only an eligible node is cordoned, so
// the record itself says the node was eligible before. At the grant the
// cordon becomes part of the drain (grant: EligibleBefore), and the usual
// eligibility restore after the reboot gives the node back.

// CordonHolds reports whether p's cordon still holds n: n is the node it
// cordoned and no drain of someone else's began since (an operator who drains
// the node takes it over, and it is theirs to give back).
func CordonHolds(n *NodeView, p store.Plan) bool {
	if n == nil || p.CordonedAt.IsZero() || n.ID != p.CordonNode {
		return false
	}
	foreign := n.DrainGrant == "" && (n.Draining || n.DrainStatus != "" && n.DrainStartedAt.After(p.CordonedAt))
	return !foreign
}

// NodeHoldOf is NodeHold for a host whose plan is p: a node ineligible by
// p's own cordon is rollboot's, not an operator's toggle, and holds nothing.
func NodeHoldOf(n *NodeView, p store.Plan) WaitReason {
	if n != nil && n.Status == "ready" && !n.Draining && CordonHolds(n, p) {
		return WaitReason{}
	}
	return NodeHold(n)
}

// cordon adds to d, the decision of a host whose plan was in.Plan, the
// cordon's part: a pending host admission wants cordoned gets it; a cordon
// no longer wanted (the host withdrawn, canceled, overtaken, its group
// paused or out of its window, cordon_next off or lowered, the capacity gate
// short of room) is given back; one whose node someone else drained since,
// or that is not the host's node any more, is forgotten without touching the
// node. A grant took the cordon into the drain already (grant).
func cordon(in Input, d Decision) Decision {
	if d.Plan.Phase != store.PhasePending {
		d.Plan.NoCordon = ""
	} else if d.Plan.NoCordon != in.NoCordon {
		d.Plan.NoCordon = in.NoCordon
	}
	if d.Plan.NoCordon != in.Plan.NoCordon {
		d.Write = true
		if d.Event == "" && d.Plan.NoCordon != "" {
			d.Event = "next in line, not cordoned" // why: in NoCordon
		}
	}
	held := !in.Plan.CordonedAt.IsZero() && !d.StartDrain
	n := in.Node
	want := in.Cordon && d.Plan.Phase == store.PhasePending && d.Waiting.Kind == WaitQueued &&
		n != nil && n.Status == "ready" && !n.Draining && NodeHoldOf(n, in.Plan).IsZero()
	switch {
	case held && !CordonHolds(n, in.Plan):
		d = forgetCordon(d, "cordon forgotten: the node is someone else's now")
	case held && !want:
		if !n.Eligible && !n.Draining {
			d.SetEligible = true // Nomad takes it on a node down too (Node.UpdateEligibility)
		}
		d = forgetCordon(d, "cordon given back: no longer next in line")
	case held && n.Eligible:
		d.Cordon = true // recorded, not carried out (a crash, an error), or undone by hand: again
	case want && !held && n.Eligible:
		d.Plan.CordonedAt, d.Plan.CordonNode = in.Now, n.ID
		d.Write, d.Cordon = true, true
		if d.Event == "" {
			d.Event = "cordoned: next in line"
		}
	}
	return d
}

// forgetCordon clears the plan's cordon.
func forgetCordon(d Decision, event string) Decision {
	d.Plan.CordonedAt, d.Plan.CordonNode = time.Time{}, ""
	d.Write = true
	if d.Event == "" {
		d.Event = event
	}
	return d
}

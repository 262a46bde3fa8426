package phase

import "github.com/rollboot/rollboot/internal/store"

// How a decision may be carried out beside others of its pass. A pass carries
// out the decisions that take something out of service one after the other,
// then the rest side by side (the coordinator's apply.go); a freed slot may be
// handed out in the pass that freed it (its regrant.go).

// Acts reports whether carrying d out does anything: a write, a drain, a
// cancel carried out.
func (d Decision) Acts() bool { return d.Changes() || d.ClearCancel }

// PlanOnly reports whether carrying d out is only storing its plan: no node is
// given back or taken out, no cycle closed, nothing in the control state
// cleared, nothing to alert. Such decisions of different hosts touch different
// variables and nothing else, so they may be stored in any order and at once.
func (d Decision) PlanOnly() bool {
	return d.Write && !d.StartDrain && !d.CancelDrain && !d.SetEligible && !d.Cordon && !d.ClearRequest && !d.ClearRelease &&
		d.History == nil && len(d.HandOver) == 0 && d.Unhealthy == "" && !d.ClearCancel
}

// GivesBackOnly reports whether carrying d out only gives a node back and
// closes its cycle: cancel the drain, restore eligibility, write the history
// record (its path is the cycle's own), store the plan. Nothing is taken out
// of service and no shared variable is written (a cleared request or release
// may be an entry of the control variable, so those are left out).
func (d Decision) GivesBackOnly() bool {
	return !d.StartDrain && !d.Cordon && len(d.HandOver) == 0 && !d.ClearRequest && !d.ClearRelease && !d.ClearCancel
}

// StoredTogether reports whether d may be carried out side by side with the
// other such decisions of its pass, after the rest: it is PlanOnly or
// GivesBackOnly (neither takes anything out of service).
func (d Decision) StoredTogether() bool { return d.PlanOnly() || d.GivesBackOnly() }

// StoredApart reports whether d touches nothing but its own host's plan and
// node (no shared variable cleared, no leadership handed over), so that grants
// may be carried out side by side, each in its own crash-safe order.
func (d Decision) StoredApart() bool {
	return len(d.HandOver) == 0 && !d.ClearRequest && !d.ClearRelease && !d.ClearCancel
}

// FreesSlot reports whether carrying d out, decided on in, frees the host's
// slot: its plan leaves an active phase (a cycle closed, released, aborted).
func (d Decision) FreesSlot(in Input) bool { return d.Write && in.Plan.Active() && !d.Plan.Active() }

// BecomesPending reports whether carrying d out, decided on in, makes the host
// pending (its need seen, or its backoff over).
func (d Decision) BecomesPending(in Input) bool {
	return d.Write && in.Plan.Phase != store.PhasePending && d.Plan.Phase == store.PhasePending
}

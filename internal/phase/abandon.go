package phase

import (
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// holdsNoSlotStuck: the host has neither a Nomad node nor a server of any
// cluster, so nothing the clusters own could show it back, and nothing needs
// its slot kept for safety: a stuck slot would only stop its group (a host
// record written for a host that does not exist went stuck and held its
// group's slot for good). Its slot is freed instead (abandon).
func holdsNoSlotStuck(in Input) bool {
	return in.Node == nil && (in.Host == nil || len(in.Host.Servers) == 0)
}

// abandon ends the cycle of a host that would be stuck but keeps no slot
// (holdsNoSlotStuck): a history record "abandoned" says why, and the host
// backs off before it is granted again (doubling per attempt), so a host that
// never comes back does not take the group's slot again at once.
func abandon(in Input, d Decision, p store.Plan, why string) Decision {
	h := history(p, in, "abandoned")
	h.Error = why + "; the slot is freed: a host without a Nomad node or a server keeps no slot while stuck"
	d.History = h
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = h.Error
	d.Plan.Held = false
	d.Write, d.Event = true, "abandoned" // why: in LastError
	return d
}

// forgotten: an idle host with a stored plan but no usable record and no
// Nomad node is gone (decommissioned, or `rollboot forget` deleted its record):
// its plan is deleted, so that it leaves every view, metric and status table.
// A host whose record comes back gets a new plan when it needs one.
func forgotten(in Input) bool {
	return in.Host == nil && in.Node == nil && in.Plan.ModifyIndex != 0 && !in.Plan.Active() &&
		in.Request == nil && in.CancelAt.IsZero() && in.ReleaseAt.IsZero()
}

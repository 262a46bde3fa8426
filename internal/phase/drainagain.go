package phase

// drainAgain issues the drain of the current grant again when someone changed
// the node's eligibility after its drain completed, once the node is
// ineligible again and nothing drains it. While it was eligible Nomad may have
// placed work on it, so the agent's final go/no-go, which sees the same
// events, holds the reboot (an ineligible node gets no new placements, and a
// completed drain moved every other allocation: only an eligibility change
// after it can let work land). A new drain, completing after the change, moves
// that work and lets the agent go on. While the node is eligible the operator
// has it: the host waits, its slot taken, and status says why (the agent's
// hold).
//
// The node's own client drains it too when it stops (drain_on_shutdown,
// selfdrain.go): at the reboot, that is the reboot under way; before the
// agent announced the reboot (a client restarted while the host waits in
// drained), its drain replaced the grant's as the node's last, and the
// agent's go/no-go, which wants the grant's drain complete, would hold. The
// grant's drain is then issued again: the node is empty and ineligible, so it
// completes at once.
func drainAgain(in Input, d Decision) (Decision, bool) {
	n := in.Node
	if n == nil || n.Eligible || n.Draining {
		return d, false
	}
	var why string
	switch {
	case n.DrainGrant == d.Plan.GrantID && n.EligibilityIndex > n.DrainDoneIndex:
		why = "draining again: the node's eligibility changed after its drain completed"
	case n.DrainBySelf && (in.Host == nil || in.Host.RebootingGrant != d.Plan.GrantID):
		why = "draining again: the node's client drained it itself (drain_on_shutdown) before the agent started the reboot"
	default:
		return d, false
	}
	if rebootSeen(in, d.Plan) != "" {
		return d, false // the host rebooted: the rejoin gives the node back
	}
	d.StartDrain = true
	d.Event = why
	d.Waiting = WaitFor(WaitDraining, "")
	return d, true
}

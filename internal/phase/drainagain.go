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
func drainAgain(in Input, d Decision) (Decision, bool) {
	n := in.Node
	if n == nil || n.Eligible || n.Draining || n.DrainGrant != d.Plan.GrantID || n.EligibilityIndex <= n.DrainDoneIndex {
		return d, false
	}
	if rebootSeen(in, d.Plan) != "" {
		return d, false // the host rebooted: the rejoin gives the node back
	}
	d.StartDrain = true
	d.Event = "draining again: the node's eligibility changed after its drain completed"
	d.Waiting = WaitFor(WaitDraining, "")
	return d, true
}

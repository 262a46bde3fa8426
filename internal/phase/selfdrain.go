package phase

// A Nomad client configured with drain_on_shutdown drains its own node when
// its agent leaves (client/client.go Leave → client/drain.go DrainSelf: a
// drain with the configured deadline and ignore_system_jobs, meta message
// "shutting down", MarkEligible false), and waits for it before it stops. In a
// rollboot cycle that is the reboot under way: the node was drained by the
// grant, so the client's own drain finds nothing to move (or only system
// allocations, with ignore_system_jobs = false) and completes. It replaces the
// node's LastDrain, so the node no longer names rollboot's grant; the cycle
// goes on (takenBack does not count it as an operator's drain), and the
// rejoin gives the node its eligibility back from the plan, as after
// rollboot's own drain. Nomad keeps the node ineligible across the restart
// (state_store.go upsertNodeTxn keeps SchedulingEligibility), so outside a
// cycle (the host rebooted or its client restarted without rollboot) the node
// stays ineligible, as it would without rollboot: a pending host on it waits
// as foreign_ineligible until the operator makes it eligible again, and the
// reason says it was the client's own drain.

// foreignDrainDetail is the detail of a foreign_ineligible wait: the last
// drain's status, and whose it was when the node's own client drained it.
func foreignDrainDetail(n *NodeView) string {
	if n.DrainBySelf {
		return n.DrainStatus + ", by the node's own client on shutdown (drain_on_shutdown)"
	}
	return n.DrainStatus
}

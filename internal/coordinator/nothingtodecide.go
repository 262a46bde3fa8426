package coordinator

import "github.com/rollboot/rollboot/internal/phase"

// nothingToDecide reports whether the phase machine has nothing to decide for a host this
// pass, without building its Input: the host is idle (no plan, or an idle one),
// its record does not ask for a reboot, and no request, cancel or release names
// it. phase.Step then keeps its plan as it is, waits for nothing and writes nothing,
// so the pass only counts it among the hosts not waiting. Most hosts of a large
// cluster are idle at any time: at 5,000 hosts, building each one's phase.Input and
// stepping it was the largest walk of a pass mid-rollout.
//
// Each condition is one phase.Step reads for an idle host (decide.go: Need, the
// release at the top of step, staleDrain, stepIdle, and the cancel it clears);
// TestQuietSteps holds them together.
//
// underWay: the host's plan is under way (any phase but idle; a planCursor
// tells without looking the plan up).
func nothingToDecide(s *snapshot, hv *hostView, name string, underWay bool) bool {
	if hv.rec != nil && hv.rec.RebootRequired {
		return false
	}
	if underWay {
		return false
	}
	if hv.rec == nil && hv.node == nil {
		return false // a host gone, whose plan may be deleted (forgotten)
	}
	if n := hv.node; n != nil && n.DrainGrant != "" && (n.Draining || !n.Eligible) && phase.IsStaleDrain(n, s.plans[name]) {
		return false // a drain of ours that no cycle holds (staleDrain); the plan looked up only then
	}
	ctl := &s.control
	if _, ok := ctl.Requests[name]; ok {
		return false
	}
	if _, ok := ctl.Cancels[name]; ok {
		return false
	}
	_, ok := ctl.Releases[name]
	return !ok
}

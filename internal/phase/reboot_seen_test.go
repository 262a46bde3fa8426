package phase

import (
	"testing"

	"github.com/rollboot/rollboot/internal/store"
)

// The decision that sees a host's reboot also restores its node's eligibility
// when the node is already ready again: the node waits for no second pass.
// Nothing else of the rejoin is decided then (the checks after eligibility are
// read for rejoining hosts only), and a node not ready, already eligible, or
// ineligible before the cycle is left as it is.
func TestEligibilityRestoredAsTheRebootIsSeen(t *testing.T) {
	ineligible := func(n *NodeView) { n.Eligible = false; clientRestart(n) }
	for _, tc := range []struct {
		name     string
		in       Input
		give     string // "set", "cancel" (cancel the drain, marking it eligible) or "" (nothing)
		rebooted bool   // the plan went through rebooting (from drained)
	}{
		{name: "rebooting, new boot ID, node ready and ineligible", give: "set",
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseRebooting, nil), Node: node(ineligible)}},
		{name: "drained, new boot ID, node ready and ineligible", give: "set", rebooted: true,
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseDrained, nil), Node: node(ineligible)}},
		{name: "rebooting, node missed heartbeats and is ready, still draining", give: "cancel",
			in: Input{Host: rebootingHost("g1"), Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.Draining, n.MissedHeartbeatIndex = false, true, 60 })}},
		{name: "node not ready yet",
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseRebooting, nil),
				Node: restartedNode(func(n *NodeView) { n.Eligible, n.Status = false, "initializing" })}},
		{name: "node ineligible before the cycle",
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.EligibleBefore = false }),
				Node: node(ineligible)}},
		{name: "node eligible already",
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseRebooting, nil), Node: restartedNode(nil)}},
		{name: "no node",
			in: Input{Host: host("b2", false), Plan: plan(store.PhaseRebooting, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now, tc.in.Timing = t0, timing
			d := Step(tc.in)
			if d.Plan.Phase != store.PhaseRejoining || !d.Write {
				t.Fatalf("phase %s, write %v: want the rejoin stored", d.Plan.Phase, d.Write)
			}
			if got := !d.Plan.Timeline[store.PhaseRebooting].IsZero(); tc.rebooted && !got {
				t.Errorf("timeline %v: no rebooting", d.Plan.Timeline)
			}
			give := ""
			switch {
			case d.SetEligible && !d.CancelDrain:
				give = "set"
			case d.CancelDrain && d.MarkEligible && !d.SetEligible:
				give = "cancel"
			case d.SetEligible || d.CancelDrain || d.MarkEligible:
				give = "mixed"
			}
			if give != tc.give {
				t.Errorf("gives the node back by %q, want %q (decision %+v)", give, tc.give, d)
			}
			if wantWait := tc.give != ""; (d.Waiting.Kind == WaitEligibility) != wantWait {
				t.Errorf("waits for %v", d.Waiting)
			}
			if d.History != nil || d.StartDrain || d.Plan.Phase != store.PhaseRejoining {
				t.Errorf("decided more than the rejoin's first step: %+v", d)
			}
			if EligibleAgain(tc.in, d) != (tc.give != "") {
				t.Errorf("EligibleAgain = %v, want %v", !(tc.give != ""), tc.give != "")
			}
		})
	}
}

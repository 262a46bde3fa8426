package phase

import (
	"testing"

	"github.com/rollboot/rollboot/internal/store"
)

// selfDrained is a node whose last drain its own client made on shutdown.
func selfDrained(n *NodeView) {
	drainedNode(n)
	n.DrainGrant, n.DrainBySelf, n.DrainStatus = "", true, "complete"
}

// Someone changed the node's eligibility after its drain completed: once it
// is ineligible again, the drain of the grant is issued again, so that what
// Nomad placed meanwhile moves and the agent's final go/no-go can pass.
func TestDrainAgainAfterAForeignEligibilityChange(t *testing.T) {
	changed := func(mod func(*NodeView)) *NodeView {
		return node(func(n *NodeView) {
			drainedNode(n)
			n.DrainDoneIndex, n.EligibilityIndex = 50, 60
			if mod != nil {
				mod(n)
			}
		})
	}
	held := holdingHost("the node's eligibility changed after its drain completed")
	for _, tc := range []struct {
		name  string
		in    Input
		drain bool
	}{
		{"ineligible again after the change: drained again",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: held, Node: changed(nil)}, true},
		{"drained phase too",
			Input{Plan: plan(store.PhaseDrained, nil), Host: host("b1", true), Node: changed(nil)}, true},
		{"draining again already",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: held, Node: changed(func(n *NodeView) { n.Draining = true })}, false},
		{"the new drain completed after the change",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: held, Node: changed(func(n *NodeView) { n.DrainDoneIndex = 70 })}, false},
		{"the last drain is someone else's",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: held, Node: changed(func(n *NodeView) { n.DrainGrant = "other" })}, false},
		{"no change after the drain",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: held, Node: node(drainedNode)}, false},
		{"the client drained itself before the agent announced the reboot: drained again",
			Input{Plan: plan(store.PhaseDrained, nil), Host: host("b1", true), Node: node(selfDrained)}, true},
		{"the client drained itself at the announced reboot: the reboot goes on",
			Input{Plan: plan(store.PhaseDrained, nil), Host: rebootingHost("g1"), Node: node(selfDrained)}, false},
		{"rebooting: the client's drain is the reboot's",
			Input{Plan: plan(store.PhaseRebooting, nil), Host: rebootingHost("g1"), Node: node(selfDrained)}, false},
		{"the client's own drain still running",
			Input{Plan: plan(store.PhaseDrained, nil), Host: host("b1", true), Node: node(func(n *NodeView) { selfDrained(n); n.Draining = true })}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now, tc.in.Timing = t0, timing
			d := Step(tc.in)
			if d.StartDrain != tc.drain {
				t.Fatalf("start drain %v, want %v (event %q, waiting %q)", d.StartDrain, tc.drain, d.Event, d.Waiting)
			}
			if tc.drain && (d.Plan.Phase != tc.in.Plan.Phase || d.Plan.GrantID != "g1") {
				t.Errorf("plan %s grant %s: want the same phase and grant", d.Plan.Phase, d.Plan.GrantID)
			}
		})
	}
}

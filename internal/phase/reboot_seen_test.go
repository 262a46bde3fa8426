package phase

import (
	"strings"
	"testing"
	"time"

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

// A host back from its reboot (a new boot ID, its client registered again)
// whose node is not ready yet stays in its phase, writing nothing: the
// rejoin's first step waits for the node, and the pass that sees it ready
// enters the rejoin and gives the node back at once. Past rejoin_timeout
// since the phase began it is stuck, with why; a stuck host whose node is not
// ready yet stays stuck, and carries on once it is.
func TestRejoinWaitsForTheNodeToBeReady(t *testing.T) {
	initializing := func(n *NodeView) { n.Eligible, n.Status = false, "initializing" }
	late := func(p *store.Plan) { p.PhaseSince = t0.Add(-timing.RejoinTimeout) }
	stuck := plan(store.PhaseStuck, func(p *store.Plan) {
		p.LastError = "the node was not ready within 30m0s of the reboot"
		p.Timeline[store.PhaseRebooting] = t0.Add(-time.Hour)
		p.Waiting, p.WaitingKind = stuckWait(*p).Stored(), WaitStuck.Name() // as stored when it got stuck
	})
	for _, tc := range []struct {
		name  string
		plan  store.Plan
		node  func(*NodeView)
		phase string // after the step
		write bool
		wait  WaitKind
		err   string // part of the stuck reason
	}{
		{name: "rebooting", plan: plan(store.PhaseRebooting, nil), node: initializing,
			phase: store.PhaseRebooting, wait: WaitNodeToBeReady},
		{name: "drained, the reboot seen from there", plan: plan(store.PhaseDrained, nil), node: initializing,
			phase: store.PhaseDrained, wait: WaitNodeToBeReady},
		{name: "rebooting, past rejoin_timeout", plan: plan(store.PhaseRebooting, late), node: initializing,
			phase: store.PhaseStuck, write: true, err: "the node was not ready within 30m0s of the reboot"},
		{name: "drained, past rejoin_timeout", plan: plan(store.PhaseDrained, late), node: initializing,
			phase: store.PhaseStuck, write: true, err: "the node was not ready within 30m0s of the reboot"},
		{name: "stuck, the node not ready yet", plan: stuck, node: initializing, phase: store.PhaseStuck, wait: WaitStuck},
		{name: "rebooting, the node ready", plan: plan(store.PhaseRebooting, nil), node: func(n *NodeView) { n.Eligible = false },
			phase: store.PhaseRejoining, write: true, wait: WaitEligibility},
		{name: "stuck, the node ready", plan: stuck, node: func(n *NodeView) { n.Eligible = false },
			phase: store.PhaseRejoining, write: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Step(Input{Now: t0, Timing: timing, Host: host("b2", false), Plan: tc.plan, Node: restartedNode(tc.node)})
			if d.Plan.Phase != tc.phase || d.Write != tc.write {
				t.Fatalf("phase %s, write %v; want %s, %v", d.Plan.Phase, d.Write, tc.phase, tc.write)
			}
			if tc.wait != NotWaiting && d.Waiting.Kind != tc.wait {
				t.Errorf("waits for %v, want %v", d.Waiting, tc.wait)
			}
			if !strings.Contains(d.Plan.LastError, tc.err) {
				t.Errorf("last error %q, want %q", d.Plan.LastError, tc.err)
			}
			if d.SetEligible != (tc.wait == WaitEligibility) {
				t.Errorf("gives the node back: %v", d.SetEligible)
			}
		})
	}
}

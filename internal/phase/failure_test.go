package phase

import (
	"maps"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// Which decisions fail a cycle, for the failure budgets: a host turning stuck,
// a reboot that failed, a cycle ended with its workloads unhealthy, a drain
// aborted at its deadline; nothing else.
func TestStepFailure(t *testing.T) {
	no := false
	unhealthy := &rejoin.Observed{Allocs: []rejoin.Alloc{{Name: "web.web[0]", JobType: "service",
		DesiredStatus: "run", ClientStatus: "running", Healthy: &no}}}
	release := rejoin.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoin.OnDeadlineRelease}
	long := func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }
	tests := []struct {
		name    string
		in      Input
		failure policy.FailureKind
	}{
		{name: "rebooting too long, node down: stuck",
			in: Input{Node: node(func(n *NodeView) { n.Status = "down" }), Host: host("b1", true),
				Plan: plan(store.PhaseRebooting, long)},
			failure: policy.FailStuck},
		{name: "the agent never started the reboot: stuck",
			in:      Input{Node: node(nil), Host: host("b1", true), Plan: plan(store.PhaseDrained, long)},
			failure: policy.FailStuck},
		{name: "a failed hook: reboot failed",
			in: Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"),
				Node: node(drainedNode)},
			failure: policy.FailRebootFailed},
		{name: "released at the healthy deadline with workloads unhealthy",
			in: Input{Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.Timeline[store.PhaseRejoining] = t0.Add(-11 * time.Minute) }),
				Healthy: release, Health: unhealthy, Host: host("b2", false), Node: restartedNode(nil)},
			failure: policy.FailUnhealthy},
		{name: "back and healthy: no failure",
			in: Input{Plan: plan(store.PhaseRejoining, nil), Host: host("b2", false), Node: restartedNode(nil)}},
		{name: "the drain past its deadline: aborted",
			in: Input{Plan: plan(store.PhaseDraining, long), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible, n.Draining, n.DrainGrant = false, true, "g1" })},
			failure: policy.FailDrainAborted},
		{name: "a drain canceled by someone else: no failure of the host",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g1", "canceled" })},
		},
		{name: "still draining: no failure",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible, n.Draining, n.DrainGrant = false, true, "g1" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Timing = t0, timing
			d := Step(in)
			if d.Failure != tt.failure {
				t.Errorf("failure %q (phase %s, %s), want %q", d.Failure, d.Plan.Phase, d.Event, tt.failure)
			}
		})
	}
}

// A grant keeps the drain starts of the last hour in the plan, and its own.
func TestGrantKeepsDrainStarts(t *testing.T) {
	p := plan(store.PhasePending, func(p *store.Plan) {
		p.GrantID, p.DrainStarts = "", []time.Time{t0.Add(-2 * time.Hour), t0.Add(-10 * time.Minute)}
	})
	d := Step(Input{Now: t0, Timing: timing, Plan: p, Host: host("b1", true), Node: node(nil), Admitted: true, NewGrantID: "g2"})
	if d.Plan.Phase != store.PhaseDraining || len(d.Plan.DrainStarts) != 2 || !d.Plan.DrainStarts[1].Equal(t0) {
		t.Errorf("phase %s, drain starts %v", d.Plan.Phase, d.Plan.DrainStarts)
	}
}

// A retried attempt starts a timeline of its own: the time the host was
// queued stays, the earlier attempt's draining, drained, rebooting and
// rejoining times go, so that its drain, reboot and rejoin are dated from it.
func TestRetriedGrantHasItsOwnTimeline(t *testing.T) {
	queued := t0.Add(-time.Hour)
	p := plan(store.PhasePending, func(p *store.Plan) {
		p.GrantID = ""
		for _, ph := range []string{store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining, store.PhaseBackoff} {
			p.Timeline[ph] = t0.Add(-30 * time.Minute)
		}
		p.Timeline[store.PhasePending] = queued
	})
	d := Step(Input{Now: t0, Timing: timing, Plan: p, Host: host("b1", true), Node: node(nil), Admitted: true, NewGrantID: "g2"})
	want := map[string]time.Time{store.PhasePending: queued, store.PhaseDraining: t0}
	if d.Plan.Phase != store.PhaseDraining || !maps.EqualFunc(d.Plan.Timeline, want, time.Time.Equal) {
		t.Errorf("phase %s, timeline %v, want %v", d.Plan.Phase, d.Plan.Timeline, want)
	}
	if !p.Timeline[store.PhaseRejoining].Equal(t0.Add(-30 * time.Minute)) {
		t.Error("the grant changed the plan it was given")
	}
}

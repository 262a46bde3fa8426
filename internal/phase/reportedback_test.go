package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// fleetLockHost is the record the FleetLock server writes for a client without a
// node: no boot ID of its own, and the grant it reported back from.
func fleetLockHost(rebootedGrant string) *store.HostRecord {
	return &store.HostRecord{Host: "h1", Roles: []string{store.RoleFleetLock}, FleetLockID: "id1",
		RebootingGrant: "g1", RebootedGrant: rebootedGrant}
}

// fleetLockPlan is the plan of such a client granted g1.
func fleetLockPlan(phase string) store.Plan {
	return plan(phase, func(p *store.Plan) { p.BootIDAtGrant, p.NodeID, p.EligibleBefore = "", "", false })
}

// A FleetLock client's reboot is seen when the FleetLock server records that it
// came back from this grant (RebootedGrant), and only for this grant; a plan
// that a newer rollboot wrote holds its host and is never written.
func TestReportedBack(t *testing.T) {
	tests := []struct {
		name  string
		in    Input
		phase string
		write bool
		event string
		ops   bool // any Nomad operation, history or control change
	}{
		{name: "fleetlock client back from this grant: rejoining",
			in:    Input{Plan: fleetLockPlan(store.PhaseRebooting), Host: fleetLockHost("g1")},
			phase: store.PhaseRejoining, write: true, event: "the FleetLock client reports it is back from the reboot"},
		{name: "fleetlock client back from an earlier grant: still rebooting",
			in:    Input{Plan: fleetLockPlan(store.PhaseRebooting), Host: fleetLockHost("g0")},
			phase: store.PhaseRebooting},
		{name: "fleetlock client not back yet: still rebooting",
			in:    Input{Plan: fleetLockPlan(store.PhaseRebooting), Host: fleetLockHost("")},
			phase: store.PhaseRebooting},
		{name: "fleetlock client back from this grant while drained: rejoining",
			in:    Input{Plan: fleetLockPlan(store.PhaseDrained), Host: fleetLockHost("g1")},
			phase: store.PhaseRejoining, write: true, event: "the FleetLock client reports it is back from the reboot"},
		{name: "rejoining fleetlock client back: cycle done",
			in:    Input{Plan: fleetLockPlan(store.PhaseRejoining), Host: fleetLockHost("g1")},
			phase: store.PhaseIdle, write: true, event: "rebooted and back in service", ops: true},
		{name: "rejoining fleetlock client not back: waits",
			in:    Input{Plan: fleetLockPlan(store.PhaseRejoining), Host: fleetLockHost("g0")},
			phase: store.PhaseRejoining},
		{name: "agent host: a new boot ID tells, with its client's restart",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: host("b2", false), Node: restartedNode(nil)},
			phase: store.PhaseRejoining, write: true, event: "host is back with a new boot ID and its Nomad client started again"},
		{name: "plan written by a newer rollboot: held, even with a release and a need",
			in: Input{Plan: store.Plan{Host: "h1", Phase: store.PhaseUnreadable, Waiting: "held: newer"},
				Host: host("b2", true), Node: node(func(n *NodeView) { n.Draining = true }), ReleaseAt: t0,
				Request: &store.Request{At: t0.Add(-time.Hour)}, Admitted: true, NewGrantID: "g9"},
			phase: store.PhaseUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Timing = t0, timing
			d := Step(tt.in)
			if w := writesBeyondStatus(t, tt.in, d); d.Plan.Phase != tt.phase || w != tt.write || d.Event != tt.event {
				t.Errorf("phase %s write %v event %q, want %s %v %q", d.Plan.Phase, w, d.Event, tt.phase, tt.write, tt.event)
			}
			ops := d.StartDrain || d.CancelDrain || d.SetEligible || d.MarkEligible || len(d.HandOver) > 0 ||
				d.History != nil || d.ClearRequest || d.ClearRelease
			if ops != tt.ops {
				t.Errorf("operations %+v, want any: %v", d, tt.ops)
			}
			if tt.phase == store.PhaseUnreadable && (d.Waiting.Kind != WaitPlanUnreadable || d.Waiting.String() != tt.in.Plan.Waiting || d.Write) {
				t.Errorf("waiting %q, want the plan's %q (no write to keep it)", d.Waiting, tt.in.Plan.Waiting)
			}
		})
	}
}

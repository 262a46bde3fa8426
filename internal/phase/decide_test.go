package phase

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

var timing = Timing{
	DrainDeadline:   10 * time.Minute,
	RetryBackoff:    time.Minute,
	RetryMaxBackoff: 8 * time.Minute,
	RejoinTimeout:   30 * time.Minute,
	LoopBackoff:     time.Hour,
	LoopMaxBackoff:  24 * time.Hour,
}

func host(boot string, required bool) *store.HostRecord {
	return &store.HostRecord{Host: "h1", NodeID: "n1", BootID: boot, RebootRequired: required,
		Reason: "sentinel", RequestedAt: t0.Add(-time.Hour)}
}

// rebootingHost is the record of an agent that announced the reboot for grant.
func rebootingHost(grant string) *store.HostRecord {
	h := host("b1", true)
	h.RebootingGrant = grant
	return h
}

// clientRestarted marks the node's Nomad client as started again after the
// drain of plan: the sign from Nomad that a new boot ID needs.
func clientRestart(n *NodeView) { n.ClientStartedAt = t0.Add(-time.Second) }

// restartedNode is node(mod) whose client started again after the drain.
func restartedNode(mod func(*NodeView)) *NodeView {
	n := node(mod)
	clientRestart(n)
	return n
}

// serverOnlyHost is the record of a host without a Nomad client that runs the
// Nomad server s1, with boot ID boot.
func serverOnlyHost(boot string) *store.HostRecord {
	h := host(boot, false)
	h.NodeID, h.Roles = "", []string{store.RoleNomadServer}
	h.Servers = []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}
	return h
}

// stableAtGrant records that the host's servers were stable since an hour
// before t0 when it was granted.
func stableAtGrant(p *store.Plan) { p.ServersStableSince = t0.Add(-time.Hour) }

// serverStableSince is a healthy Nomad cluster whose server s1 has been
// stable since at.
func serverStableSince(at time.Time) map[string]health.ClusterHealth {
	return map[string]health.ClusterHealth{"nomad/global": cluster(health.Nomad, "global", func(h *health.ClusterHealth) {
		h.Servers[0].StableSince = at
	})}
}

func node(mod func(*NodeView)) *NodeView {
	n := &NodeView{ID: "n1", Status: "ready", Eligible: true}
	if mod != nil {
		mod(n)
	}
	return n
}

func plan(phase string, mod func(*store.Plan)) store.Plan {
	p := store.Plan{Host: "h1", Phase: phase, ModifyIndex: 7, PhaseSince: t0.Add(-time.Minute), GrantID: "g1",
		BootIDAtGrant: "b1", NodeID: "n1", EligibleBefore: true, Attempt: 1, Group: "web",
		RequestedAt: t0.Add(-time.Hour),
		Timeline:    map[string]time.Time{store.PhasePending: t0.Add(-time.Hour), phase: t0.Add(-time.Minute)}}
	if phase == store.PhaseIdle {
		p.GrantID, p.BootIDAtGrant, p.Attempt, p.EligibleBefore = "", "", 0, false
	}
	switch phase {
	case store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining, store.PhaseStuck:
		if _, ok := p.Timeline[store.PhaseDrained]; !ok {
			p.Timeline[store.PhaseDrained] = t0.Add(-2 * time.Minute)
		}
	}
	if mod != nil {
		mod(&p)
	}
	return p
}

// writesBeyondStatus reports whether d writes more than the host's status line
// (why it waits, kept in the plan for `rollboot status`): whether Step still
// writes once the stored plan shows that reason. It also checks that a plan
// Step writes, or that of a host out of idle, shows the reason d gives as
// stored (none for a host on its way).
func writesBeyondStatus(t *testing.T, in Input, d Decision) bool {
	t.Helper()
	if (d.Write || in.Plan.Phase != store.PhaseIdle) && d.Plan.Waiting != d.Waiting.Stored() {
		t.Errorf("the plan shows %q, the decision waits for %q (stored as %q)", d.Plan.Waiting, d.Waiting, d.Waiting.Stored())
	}
	if !d.Write || in.Plan.Waiting == d.Plan.Waiting {
		return d.Write
	}
	in.Plan.Waiting = d.Plan.Waiting
	return Step(in).Write
}

func TestStep(t *testing.T) {
	tests := []struct {
		name  string
		in    Input
		phase string // expected next phase
		write bool
		check func(t *testing.T, d Decision)
	}{
		{
			name:  "idle without a need stays idle and writes nothing",
			in:    Input{Plan: plan(store.PhaseIdle, nil), Host: host("b1", false), Node: node(nil)},
			phase: store.PhaseIdle,
		},
		{
			name:  "a host first seen gets an idle plan stored, and nothing else",
			in:    Input{Plan: store.Plan{Host: "h1", Phase: store.PhaseIdle}, Host: host("b1", false), Node: node(nil)},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.ModifyIndex != 0 || d.Event != "" || d.DeletePlan || d.StartDrain {
					t.Errorf("decision for a host first seen: %+v", d)
				}
			},
		},
		{
			name:  "no plan is stored for a host without a record",
			in:    Input{Plan: store.Plan{Host: "h1", Phase: store.PhaseIdle}, Node: node(nil)},
			phase: store.PhaseIdle,
		},
		{
			name:  "idle with a sentinel goes pending",
			in:    Input{Plan: plan(store.PhaseIdle, nil), Host: host("b1", true), Node: node(nil)},
			phase: store.PhasePending, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Plan.RequestedAt.Equal(t0.Add(-time.Hour)) || d.Plan.Reason != "sentinel" {
					t.Errorf("request not recorded: %+v", d.Plan)
				}
			},
		},
		{
			name: "a manual request counts as a need",
			in: Input{Plan: plan(store.PhaseIdle, nil), Host: host("b1", false), Node: node(nil),
				Request: &store.Request{At: t0.Add(-time.Minute), Reason: "kernel"}},
			phase: store.PhasePending, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.Reason != "manual request: kernel" {
					t.Errorf("reason = %q", d.Plan.Reason)
				}
			},
		},
		{
			name: "a canceled request is no need",
			in: Input{Plan: plan(store.PhaseIdle, nil), Host: host("b1", true), Node: node(nil),
				CancelAt: t0.Add(-time.Minute)},
			phase: store.PhaseIdle,
		},
		{
			name: "still needed right after our reboot is a reboot loop held with backoff",
			in: Input{Plan: plan(store.PhaseIdle, func(p *store.Plan) {
				p.LastAfterBootID, p.LastCompleted, p.LoopCount = "b2", t0.Add(-time.Minute), 1
				p.LastNeedAt = t0.Add(-time.Hour)
			}), Host: host("b2", true), Node: node(nil)},
			phase: store.PhasePending, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.LoopCount != 2 {
					t.Errorf("loop count = %d, want 2", d.Plan.LoopCount)
				}
				// Second loop: base doubled once.
				if want := t0.Add(-time.Minute + 2*time.Hour); !d.Plan.NextTry.Equal(want) {
					t.Errorf("next try = %v, want %v", d.Plan.NextTry, want)
				}
				if !strings.Contains(d.Plan.LastError, "reboot loop") {
					t.Errorf("last error = %q", d.Plan.LastError)
				}
			},
		},
		{
			name: "a need after a later boot is no loop",
			in: Input{Plan: plan(store.PhaseIdle, func(p *store.Plan) {
				p.LastAfterBootID, p.LastCompleted, p.LoopCount = "b2", t0.Add(-time.Minute), 3
			}), Host: host("b3", true), Node: node(nil)},
			phase: store.PhasePending, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.LoopCount != 0 || !d.Plan.NextTry.IsZero() {
					t.Errorf("loop not reset: %+v", d.Plan)
				}
			},
		},
		{
			name:  "pending and not admitted waits",
			in:    Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Node: node(nil)},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.Waiting.IsZero() {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "pending while paused waits even if admitted",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Node: node(nil),
				Paused: true, Admitted: true},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.Waiting.String() != "paused" {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "a server host is never granted",
			in: Input{Plan: plan(store.PhasePending, nil), Admitted: true, NewGrantID: "g9", Node: node(nil),
				Host: &store.HostRecord{Host: "h1", BootID: "b1", RebootRequired: true, Roles: []string{store.RoleNomadClient, store.RoleNomadServer}}},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || !strings.Contains(d.Waiting.String(), "nomad-server") {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "a drained server host that leads hands the leadership over first",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true), ServerGates: true, Leads: []string{"nomad", "vault"},
				Node: node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g1", "complete" })},
			// The hand-over changes nothing in the plan but its status line
			// (write: false is checked beyond it).
			phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if len(d.HandOver) != 2 {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "a refused hand-over with the hold policy waits with the reason",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true), ServerGates: true, Leads: []string{"nomad"},
				HandOverBlocked: WaitFor(WaitHandOverRefused, "needs a management token"),
				Node:            node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g1", "complete" })},
			phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if len(d.HandOver) != 0 || !strings.Contains(d.Waiting.String(), "management token") {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "a server host without a node that leads goes to draining for the hand-over",
			in: Input{Plan: plan(store.PhasePending, nil), Admitted: true, NewGrantID: "g9", ServerGates: true, Leads: []string{"consul"},
				Host: &store.HostRecord{Host: "h1", BootID: "b1", RebootRequired: true, Roles: []string{store.RoleConsulServer}}},
			phase: store.PhaseDraining, write: true,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain {
					t.Error("drain without a node")
				}
			},
		},
		{
			name: "a server host without a node that leads nothing may reboot once drained of leadership",
			in: Input{Plan: plan(store.PhaseDraining, func(p *store.Plan) { p.NodeID = "" }), ServerGates: true,
				Host: &store.HostRecord{Host: "h1", BootID: "b1", RebootRequired: true, Roles: []string{store.RoleConsulServer}}},
			phase: store.PhaseDrained, write: true,
		},
		{
			name: "rejoining waits for the servers' post-reboot gate",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false), Plan: plan(store.PhaseRejoining, nil), Node: node(nil),
				PostGate: WaitFor(WaitVaultUnseal, "h1")},
			phase: store.PhaseRejoining,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Waiting.String(), "unseal is needed") {
					t.Errorf("waiting = %q", d.Waiting)
				}
			},
		},
		{
			name: "pending waits for a down node",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true,
				Node: node(func(n *NodeView) { n.Status = "down" })},
			phase: store.PhasePending,
		},
		{
			name: "pending does not take over a drain someone else started",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true,
				Node: node(func(n *NodeView) { n.Draining, n.Eligible = true, false })},
			phase: store.PhasePending,
		},
		{
			name: "pending waits on a node someone else's completed drain left ineligible",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9",
				Node: node(func(n *NodeView) { n.Eligible, n.DrainStatus = false, "complete" })},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.Waiting.Kind != WaitForeignIneligible || !strings.Contains(d.Waiting.String(), "(complete)") {
					t.Errorf("decision = %+v, want a hold for the operator's node", d)
				}
			},
		},
		{
			name: "pending waits on a node its own client's drain on shutdown left ineligible, and says so",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9",
				Node: node(func(n *NodeView) { n.Eligible, n.DrainStatus, n.DrainBySelf = false, "complete", true })},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.Waiting.Kind != WaitForeignIneligible || !strings.Contains(d.Waiting.String(), "drain_on_shutdown") {
					t.Errorf("decision = %+v, want a hold for the operator's node, naming drain_on_shutdown", d)
				}
			},
		},
		{
			name: "pending waits on a node kept ineligible after someone else canceled a drain",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9",
				Node: node(func(n *NodeView) { n.Eligible, n.DrainStatus = false, "canceled" })},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.Waiting.Kind != WaitForeignIneligible {
					t.Errorf("decision = %+v, want a hold for the operator's node", d)
				}
			},
		},
		{
			name: "pending goes on once the operator made the drained node eligible again",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9",
				Node: node(func(n *NodeView) { n.DrainStatus = "complete" })},
			phase: store.PhaseDraining, write: true,
		},
		{
			name: "admitted: records eligibility and boot ID, then drains",
			in: Input{Plan: plan(store.PhasePending, func(p *store.Plan) { p.Attempt = 0 }), Host: host("b1", true),
				Node: node(nil), Admitted: true, NewGrantID: "g9", SystemJobs: []string{"default/exporter"}},
			phase: store.PhaseDraining, write: true,
			check: func(t *testing.T, d Decision) {
				p := d.Plan
				if !d.StartDrain || p.GrantID != "g9" || !p.EligibleBefore || p.BootIDAtGrant != "b1" ||
					p.Attempt != 1 || len(p.SystemJobs) != 1 {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "admitted on an ineligible node remembers it was ineligible",
			in: Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9",
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseDraining, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.EligibleBefore {
					t.Error("eligible_before = true for an ineligible node")
				}
			},
		},
		{
			name:  "a host with no Nomad node skips the drain",
			in:    Input{Plan: plan(store.PhasePending, nil), Host: host("b1", true), Admitted: true, NewGrantID: "g9"},
			phase: store.PhaseDrained, write: true,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain {
					t.Error("drain started without a node")
				}
			},
		},
		{
			name: "draining: the plan was stored but the drain did not land, so drain again",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible = true })},
			phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if !d.StartDrain {
					t.Error("drain not re-issued")
				}
			},
		},
		{
			name: "draining: our drain is still running",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) {
					n.Draining, n.Eligible, n.DrainGrant, n.DrainStatus = true, false, "g1", "draining"
				})},
			phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || d.CancelDrain {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "draining: our drain completed",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g1", "complete" })},
			phase: store.PhaseDrained, write: true,
		},
		{
			name: "draining: a completed drain of an older grant is not ours",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g0", "complete" })},
			phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if !d.StartDrain {
					t.Error("drain not started for the current grant")
				}
			},
		},
		{
			name: "draining past the deadline with abort: cancel, restore eligibility, back off",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseDraining, func(p *store.Plan) { p.PhaseSince = t0.Add(-11 * time.Minute); p.Attempt = 2 }),
				Node: node(func(n *NodeView) {
					n.Draining, n.Eligible, n.DrainGrant, n.DrainStatus = true, false, "g1", "draining"
				})},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.CancelDrain || !d.MarkEligible {
					t.Errorf("cancel=%v mark=%v", d.CancelDrain, d.MarkEligible)
				}
				if want := t0.Add(2 * time.Minute); !d.Plan.NextTry.Equal(want) {
					t.Errorf("next try %v, want %v (second attempt doubles)", d.Plan.NextTry, want)
				}
			},
		},
		{
			name: "abort of a node that was ineligible before leaves it ineligible",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseDraining, func(p *store.Plan) { p.PhaseSince = t0.Add(-11 * time.Minute); p.EligibleBefore = false }),
				Node: node(func(n *NodeView) { n.Draining, n.Eligible, n.DrainGrant = true, false, "g1" })},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.CancelDrain || d.MarkEligible || d.SetEligible {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "server-only host: a new boot ID and its server stable only since after the grant",
			in: Input{Now: t0, Timing: timing, Host: serverOnlyHost("b2"), Plan: plan(store.PhaseRebooting, stableAtGrant),
				Clusters: serverStableSince(t0.Add(-30 * time.Second))},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "server-only host: a new boot ID while its server is stable since before the grant: still rebooting",
			in: Input{Now: t0, Timing: timing, Host: serverOnlyHost("b2"), Plan: plan(store.PhaseRebooting, stableAtGrant),
				Clusters: serverStableSince(t0.Add(-2 * time.Hour))},
			phase: store.PhaseRebooting,
		},
		{
			// Nomad and Consul round StableSince to the second, Vault does not: at
			// the grant the latest was a Nomad time rounded up past the instant
			// the host's Vault server went down and came back sealed.
			name: "server-only host: a server back within the second of a StableSince rounded up at the grant",
			in: Input{Now: t0, Timing: timing, Host: serverOnlyHost("b2"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) {
					p.ServersStableSince = t0.Add(-30 * time.Second).Truncate(time.Second)
				}),
				Clusters: serverStableSince(t0.Add(-30 * time.Second).Truncate(time.Second).Add(-400 * time.Millisecond))},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name:  "server-only host: a new boot ID with its cluster unread: still rebooting",
			in:    Input{Now: t0, Timing: timing, Host: serverOnlyHost("b2"), Plan: plan(store.PhaseRebooting, nil)},
			phase: store.PhaseRebooting,
		},
		{
			name: "with force, the deadline is Nomad's: keep waiting",
			in: Input{Now: t0, Timing: Timing{DrainDeadline: 10 * time.Minute, ForceOnTimeout: true}, Host: host("b1", true),
				Plan: plan(store.PhaseDraining, func(p *store.Plan) { p.PhaseSince = t0.Add(-11 * time.Minute) }),
				Node: node(func(n *NodeView) { n.Draining, n.Eligible, n.DrainGrant = true, false, "g1" })},
			phase: store.PhaseDraining,
		},
		{
			name: "a drain canceled outside rollboot is a failed attempt; eligibility restored",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Plan: plan(store.PhaseDraining, nil),
				Node: node(func(n *NodeView) { n.Eligible, n.DrainGrant, n.DrainStatus = false, "g1", "canceled" })},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if d.CancelDrain || !d.SetEligible {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "canceled by the operator while draining: undo and go idle",
			in: Input{Now: t0, Host: host("b1", true), Plan: plan(store.PhaseDraining, nil), CancelAt: t0,
				Node: node(func(n *NodeView) { n.Draining, n.Eligible, n.DrainGrant = true, false, "g1" })},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.CancelDrain || !d.MarkEligible || d.History == nil || d.History.Outcome != "canceled" {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name:  "drained: the agent acknowledged the reboot",
			in:    Input{Now: t0, Timing: timing, Plan: plan(store.PhaseDrained, nil), Node: node(nil), Host: &store.HostRecord{Host: "h1", BootID: "b1", RebootingGrant: "g1"}},
			phase: store.PhaseRebooting, write: true,
		},
		{
			name:  "drained: an acknowledgement of an older grant does not count",
			in:    Input{Now: t0, Timing: timing, Plan: plan(store.PhaseDrained, nil), Node: node(nil), Host: &store.HostRecord{Host: "h1", BootID: "b1", RebootingGrant: "g0"}},
			phase: store.PhaseDrained,
		},
		{
			name:  "drained: a new boot ID means the reboot happened",
			in:    Input{Now: t0, Timing: timing, Plan: plan(store.PhaseDrained, nil), Node: restartedNode(nil), Host: host("b2", false)},
			phase: store.PhaseRejoining, write: true,
		},
		{
			// Any host can write any record: a boot ID alone proves nothing.
			name:  "drained: a new boot ID without a sign from Nomad is not a reboot",
			in:    Input{Now: t0, Timing: timing, Plan: plan(store.PhaseDrained, nil), Node: node(nil), Host: host("b2", false)},
			phase: store.PhaseDrained,
		},
		{
			name: "drained: a client that started before the drain completed is no sign",
			in: Input{Now: t0, Timing: timing, Plan: plan(store.PhaseDrained, nil), Host: host("b2", false),
				Node: node(func(n *NodeView) { n.ClientStartedAt = t0.Add(-3 * time.Minute) })},
			phase: store.PhaseDrained,
		},
		{
			name: "drained: the node went down and registered again, so the host rebooted",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseDrained, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex, n.ReregisteredIndex = false, 55, 60 })},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "drained: a re-registration from before the drain completed does not count",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseDrained, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex, n.ReregisteredIndex = false, 35, 40 })},
			phase: store.PhaseRebooting, write: true,
		},
		{
			name: "drained: a node that went down and came back without the agent announcing a reboot did not reboot",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseDrained, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex, n.ReregisteredIndex = false, 55, 60 })},
			phase: store.PhaseDrained,
		},
		{
			name: "rebooting: re-registered but not ready yet keeps waiting",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.ReregisteredIndex, n.Status = false, 60, "initializing" })},
			phase: store.PhaseRebooting,
		},
		{
			name: "rebooting: a disconnected node keeps waiting",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex, n.Status = false, 60, "disconnected" })},
			phase: store.PhaseRebooting,
		},
		{
			name: "rebooting: disconnected, then initializing, keeps waiting",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex, n.Status = false, 60, "initializing" })},
			phase: store.PhaseRebooting,
		},
		{
			name: "rebooting: disconnected and ready again (no re-registration event) means the host rebooted",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex = false, 60 })},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "rebooting: no missed heartbeat at all, the new boot ID and the client's restart tell",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: restartedNode(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseRejoining, write: true,
		},
		{
			// A forged boot ID during the reboot must not free the slot before
			// the host went down.
			name: "rebooting: a new boot ID while the client has not restarted: still rebooting",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseRebooting,
		},
		{
			name: "rebooting: the node never missed a heartbeat and the agent is not back yet: wait",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseRebooting,
		},
		{
			name: "stuck: the node came back late after missing heartbeats: rejoin",
			in: Input{Now: t0, Timing: timing, Host: rebootingHost("g1"),
				Plan: plan(store.PhaseStuck, func(p *store.Plan) { p.DrainedIndex = 50 }),
				Node: node(func(n *NodeView) { n.Eligible, n.MissedHeartbeatIndex = false, 60 })},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "rejoining on the node's word waits for the agent's new boot ID after eligibility is back",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Plan: plan(store.PhaseRejoining, nil),
				Node: node(nil)},
			phase: store.PhaseRejoining,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Waiting.String(), "new boot ID") || d.History != nil {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "draining to drained records the node's index",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) {
					n.Eligible, n.DrainGrant, n.DrainStatus, n.ModifyIndex = false, "g1", "complete", 77
				})},
			phase: store.PhaseDrained, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.DrainedIndex != 77 {
					t.Errorf("drained index = %d", d.Plan.DrainedIndex)
				}
			},
		},
		{
			name: "drained too long without the agent: stuck",
			in: Input{Now: t0, Timing: timing, Node: node(nil), Host: host("b1", true),
				Plan: plan(store.PhaseDrained, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) })},
			phase: store.PhaseStuck, write: true,
		},
		{
			name: "rebooting too long: stuck, slot kept",
			in: Input{Now: t0, Timing: timing, Node: node(func(n *NodeView) { n.Status = "down" }), Host: host("b1", true),
				Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) })},
			phase: store.PhaseStuck, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Plan.Active() {
					t.Error("stuck must keep the slot")
				}
			},
		},
		{
			name: "rejoining waits for the node to be ready",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false), Plan: plan(store.PhaseRejoining, nil),
				Node: node(func(n *NodeView) { n.Status, n.Eligible = "down", false })},
			phase: store.PhaseRejoining,
		},
		{
			name: "rejoining restores eligibility of a node that was eligible",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false), Plan: plan(store.PhaseRejoining, nil),
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseRejoining,
			check: func(t *testing.T, d Decision) {
				if !d.SetEligible {
					t.Error("eligibility not restored")
				}
			},
		},
		{
			name: "rejoining waits for the system jobs after eligibility is back",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.SystemJobs = []string{"default/exporter"} }),
				Node: node(func(n *NodeView) { n.SystemRunning = map[string]bool{} })},
			phase: store.PhaseRejoining,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Waiting.String(), "default/exporter") {
					t.Errorf("waiting = %q", d.Waiting)
				}
			},
		},
		{
			// The node's allocations are read only once the agent reported:
			// its system jobs and workloads' health are not known before, and
			// the host waits for the report, stuck past the rejoin timeout.
			name: "rejoining waits for the agent's report before the system jobs",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.SystemJobs = []string{"default/exporter"} }),
				Node: node(func(n *NodeView) { n.SystemRunning = map[string]bool{} })},
			phase: store.PhaseRejoining,
			check: func(t *testing.T, d Decision) {
				if d.Waiting.Kind != WaitNewBootID {
					t.Errorf("waiting = %q, want the agent's new boot ID", d.Waiting)
				}
			},
		},
		{
			name: "rejoining past its timeout without the agent's report: stuck for the report",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) {
					p.SystemJobs = []string{"default/exporter"}
					p.Timeline[store.PhaseRejoining] = t0.Add(-31 * time.Minute)
				}),
				Node: node(func(n *NodeView) { n.SystemRunning = map[string]bool{} })},
			phase: store.PhaseStuck, write: true,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Plan.LastError, "did not report a new boot ID") {
					t.Errorf("last error = %q", d.Plan.LastError)
				}
			},
		},
		{
			name: "rejoining done: idle, history, loop guard armed",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.SystemJobs = []string{"default/exporter"} }),
				Node: node(func(n *NodeView) { n.SystemRunning = map[string]bool{"default/exporter": true} })},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if d.History == nil || d.History.Outcome != "rebooted" || d.History.BootIDAfter != "b2" {
					t.Errorf("history = %+v", d.History)
				}
				if d.Plan.LastAfterBootID != "b2" || d.Plan.GrantID != "" {
					t.Errorf("plan = %+v", d.Plan)
				}
			},
		},
		{
			name: "a node ineligible before stays ineligible after the reboot",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.EligibleBefore = false }),
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if d.SetEligible || d.CancelDrain {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "done on the node's word: the stale record's need is not a new request",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Node: node(nil),
				Plan: plan(store.PhaseIdle, func(p *store.Plan) { p.GoneBootID = "b1" })},
			phase: store.PhaseIdle,
		},
		{
			name: "after the agent reports a new boot, its needs count again",
			in: Input{Now: t0, Timing: timing, Host: host("b2", true), Node: node(nil),
				Plan: plan(store.PhaseIdle, func(p *store.Plan) { p.GoneBootID = "b1" })},
			phase: store.PhasePending, write: true,
		},
		{
			name: "an ineligible-before node completes on its node's word and marks the boot gone",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true),
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.EligibleBefore = false }),
				Node: node(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.GoneBootID != "b1" || d.Plan.LastAfterBootID != "" {
					t.Errorf("plan = %+v", d.Plan)
				}
			},
		},
		{
			name: "stuck host back late carries on rejoining",
			in: Input{Now: t0, Timing: timing, Host: host("b2", false), Plan: plan(store.PhaseStuck, nil),
				Node: restartedNode(func(n *NodeView) { n.Eligible = false })},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "release of a stuck host restores eligibility and frees the slot",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Plan: plan(store.PhaseStuck, nil), ReleaseAt: t0,
				Node: node(func(n *NodeView) { n.Eligible, n.Status = false, "down" })},
			phase: store.PhaseIdle, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.SetEligible || !d.ClearRelease || d.History.Outcome != "released" {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name: "an old release does not cut a later cycle short",
			// The node is down: a stuck host whose node is ready with the same boot
			// ID never went down and is retried instead (notrebooted_test.go).
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Plan: plan(store.PhaseStuck, nil), ReleaseAt: t0.Add(-2 * time.Hour),
				Node: node(func(n *NodeView) { n.Eligible = false; n.Status = "down" })},
			phase: store.PhaseStuck,
			check: func(t *testing.T, d Decision) {
				if !d.ClearRelease {
					t.Error("stale release not cleared")
				}
			},
		},
		{
			name: "backoff returns to pending when its time is up",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Node: node(nil),
				Plan: plan(store.PhaseBackoff, func(p *store.Plan) { p.NextTry = t0.Add(-time.Second) })},
			phase: store.PhasePending, write: true,
		},
		{
			name: "backoff keeps waiting before its time",
			in: Input{Now: t0, Timing: timing, Host: host("b1", true), Node: node(nil),
				Plan: plan(store.PhaseBackoff, func(p *store.Plan) { p.NextTry = t0.Add(time.Second) })},
			phase: store.PhaseBackoff,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = t0
			}
			if tc.in.Timing == (Timing{}) {
				tc.in.Timing = timing
			}
			d := Step(tc.in)
			if d.Plan.Phase != tc.phase {
				t.Fatalf("phase = %s, want %s (waiting %q, event %q)", d.Plan.Phase, tc.phase, d.Waiting, d.Event)
			}
			if w := writesBeyondStatus(t, tc.in, d); w != tc.write {
				t.Errorf("write = %v, want %v", w, tc.write)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// A drain of rollboot's that no cycle of the host holds (a stopped leader's
// late drain, a cancel of the drain that did not land) is canceled, giving the
// node back when the drain's meta or the plan says it was eligible before; a
// drain by someone else, or one the host's cycle holds, is left alone.
func TestStaleDrain(t *testing.T) {
	stale := func(grant string, restores bool) func(*NodeView) {
		return func(n *NodeView) {
			n.Eligible, n.Draining, n.DrainStatus, n.DrainGrant, n.DrainRestores = false, true, "draining", grant, restores
		}
	}
	idle := func(p *store.Plan) { p.GrantID, p.EligibleBefore = "", false }
	tests := []struct {
		name         string
		plan         store.Plan
		node         *NodeView
		cancel, mark bool
		set          bool // eligibility restored without a drain to cancel
	}{
		{name: "idle, a late drain of an ended grant, eligible before", plan: plan(store.PhaseIdle, idle), node: node(stale("g0", true)),
			cancel: true, mark: true},
		{name: "idle, eligible before unknown: canceled, left ineligible", plan: plan(store.PhaseIdle, idle), node: node(stale("g0", false)),
			cancel: true},
		{name: "no plan yet", plan: store.Plan{Host: "h1"}, node: node(stale("g0", true)), cancel: true, mark: true},
		{name: "backoff after an abort whose cancel failed: the plan knows", plan: plan(store.PhaseBackoff, func(p *store.Plan) {
			p.NextTry = t0.Add(time.Hour)
		}), node: node(stale("g1", false)), cancel: true, mark: true},
		{name: "pending, another grant's drain", plan: plan(store.PhasePending, func(p *store.Plan) { p.GrantID = "" }),
			node: node(stale("g0", true)), cancel: true, mark: true},
		{name: "a foreign drain is not ours to cancel", plan: plan(store.PhaseIdle, idle), node: node(stale("", true))},
		{name: "draining for its grant: kept", plan: plan(store.PhaseDraining, nil), node: node(stale("g1", true))},
		{name: "rejoining: kept (the cycle gives it back)", plan: plan(store.PhaseRejoining, nil), node: node(stale("g1", true))},
		{name: "idle, not draining", plan: plan(store.PhaseIdle, idle), node: node(nil)},
		{name: "idle, a late drain completed at once: eligibility restored", plan: plan(store.PhaseIdle, idle), node: node(func(n *NodeView) {
			stale("g0", true)(n)
			n.Draining, n.DrainStatus, n.DrainStartedAt = false, "complete", t0.Add(-time.Second)
		}), set: true},
		{name: "idle, a completed late drain of a node ineligible before: nothing to do", plan: plan(store.PhaseIdle, idle), node: node(func(n *NodeView) {
			stale("g0", false)(n)
			n.Draining, n.DrainStatus, n.DrainStartedAt = false, "complete", t0.Add(-time.Second)
		})},
		{name: "the last cycle's drain, the node made ineligible since by an operator: left alone", plan: plan(store.PhaseIdle, func(p *store.Plan) {
			idle(p)
			p.LastCompleted = t0.Add(-time.Minute)
		}), node: node(func(n *NodeView) {
			stale("g0", true)(n)
			n.Draining, n.DrainStatus, n.DrainStartedAt = false, "complete", t0.Add(-time.Hour)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Now: t0, Timing: timing, Host: host("b1", true), Node: tt.node, Plan: tt.plan}
			d := Step(in)
			gaveBack := d.Event == "gave back a node that a drain no cycle holds took out"
			if !tt.cancel && !tt.set {
				if gaveBack {
					t.Fatalf("gave the node back: %+v", d)
				}
				return // what the phase machine does otherwise is not this test's
			}
			if !gaveBack || d.CancelDrain != tt.cancel || d.MarkEligible != tt.mark || d.SetEligible != tt.set {
				t.Fatalf("cancel %v mark eligible %v set eligible %v (event %q), want cancel %v mark %v set %v",
					d.CancelDrain, d.MarkEligible, d.SetEligible, d.Event, tt.cancel, tt.mark, tt.set)
			}
			if gaveBack && (d.Write || d.StartDrain || tt.plan.Phase != "" && d.Plan.Phase != tt.plan.Phase) {
				t.Errorf("a stale drain's cancel changed more: %+v", d)
			}
		})
	}
}

// cluster is a healthy cluster of three voters that can lose one.
func cluster(product health.Product, name string, mod func(*health.ClusterHealth)) health.ClusterHealth {
	h := health.ClusterHealth{Product: product, Cluster: name, Healthy: true, FailureTolerance: 1, Leader: "s3"}
	for _, id := range []string{"s1", "s2", "s3"} {
		h.Servers = append(h.Servers, health.ServerHealth{ID: id, Healthy: true, Voter: true, Leader: id == "s3"})
	}
	if mod != nil {
		mod(&h)
	}
	return h
}

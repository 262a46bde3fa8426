package phase

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func failedHost(boot, grant string) *store.HostRecord {
	h := host(boot, true)
	h.RebootingGrant = "g1"
	h.Failure = &store.RebootFailure{Grant: grant, Step: store.StepPreHook, ExitStatus: 3, Message: "check-disk: disk full", At: t0}
	return h
}

func holdingHost(why string) *store.HostRecord {
	h := host("b1", true)
	h.RebootingGrant, h.HoldReason = "g1", why
	return h
}

func drainedNode(n *NodeView) {
	n.Eligible, n.DrainStatus, n.DrainGrant = false, "complete", "g1"
}

// The agent's word about a grant whose host did not go down: a failure undoes the
// attempt and retries later; a hold keeps the slot and is never "stuck", up to
// rejoin_timeout, when the attempt ends as "held" and retries later.
func TestStepAgentReport(t *testing.T) {
	tests := []struct {
		name  string
		in    Input
		phase string
		write bool
		check func(t *testing.T, d Decision)
	}{
		{
			name:  "a failed hook while rebooting: eligibility back, failed attempt in history, backoff",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.SetEligible || d.CancelDrain {
					t.Errorf("set eligible %v, cancel drain %v: want eligibility restored only", d.SetEligible, d.CancelDrain)
				}
				if d.History == nil || d.History.Outcome != "failed" || !strings.Contains(d.History.Error, "exit status 3") ||
					!strings.Contains(d.History.Error, "disk full") {
					t.Errorf("history = %+v", d.History)
				}
				if !d.Plan.NextTry.Equal(t0.Add(time.Minute)) || !strings.Contains(d.Plan.LastError, "pre-reboot hook failed") {
					t.Errorf("next try %s, last error %q", d.Plan.NextTry, d.Plan.LastError)
				}
				if d.Plan.Active() {
					t.Error("a host that did not reboot still holds its slot")
				}
			},
		},
		{
			name:  "a failure reported before the coordinator saw the reboot start (still drained)",
			in:    Input{Plan: plan(store.PhaseDrained, nil), Host: failedHost("b1", "g1"), Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
		},
		{
			name: "the backoff grows with the attempts",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.Attempt = 3 }), Host: failedHost("b1", "g1"),
				Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Plan.NextTry.Equal(t0.Add(4 * time.Minute)) {
					t.Errorf("next try %s, want +4m", d.Plan.NextTry)
				}
			},
		},
		{
			name: "a node that was ineligible before stays so",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.EligibleBefore = false }),
				Host: failedHost("b1", "g1"), Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if d.SetEligible || d.MarkEligible {
					t.Error("made eligible a node that was not before")
				}
			},
		},
		{
			name:  "a drain still set is canceled, marking the node eligible",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(func(n *NodeView) { drainedNode(n); n.Draining = true })},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.CancelDrain || !d.MarkEligible {
					t.Errorf("cancel %v mark %v", d.CancelDrain, d.MarkEligible)
				}
			},
		},
		{
			name:  "a host without a node that failed is retried too",
			in:    Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.NodeID = "" }), Host: failedHost("b1", "g1")},
			phase: store.PhaseBackoff, write: true,
		},
		{
			name:  "a failure of an older grant is not this attempt's",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g0"), Node: node(drainedNode)},
			phase: store.PhaseRebooting,
		},
		{
			name:  "a failure with the node down is not proof: the host may be rebooting",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(func(n *NodeView) { drainedNode(n); n.Status = "down" })},
			phase: store.PhaseRebooting,
		},
		{
			name:  "a failure with a new boot ID: the host did reboot after all",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b2", "g1"), Node: restartedNode(drainedNode)},
			phase: store.PhaseRejoining, write: true,
		},
		{
			name: "a host that went down and never came back is still stuck",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }),
				Host: func() *store.HostRecord { h := host("b1", true); h.RebootingGrant = "g1"; return h }(),
				Node: node(func(n *NodeView) { drainedNode(n); n.Status = "down" })},
			phase: store.PhaseStuck, write: true,
		},
		{
			// The agent was cut short before its reboot (a request hung past the
			// time to come back): it reported nothing, but the node never went down.
			name: "past the time to come back with the node ready and the same boot ID: a failed attempt, not stuck",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }),
				Host: func() *store.HostRecord { h := host("b1", true); h.RebootingGrant = "g1"; return h }(),
				Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.CancelDrain && !d.SetEligible {
					t.Error("the drain is not undone")
				}
				if d.History == nil || !strings.Contains(d.History.Error, "did not go down") {
					t.Errorf("history %+v", d.History)
				}
			},
		},
		{
			name: "already stuck, but the node never went down: a failed attempt, retried",
			in: Input{Plan: plan(store.PhaseStuck, nil),
				Host: func() *store.HostRecord { h := host("b1", true); h.RebootingGrant = "g1"; return h }(),
				Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
		},
		{
			name: "a FleetLock holder past its time stays stuck: its client may still reboot",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }),
				Host: func() *store.HostRecord { h := host("b1", true); h.Roles = []string{store.RoleFleetLock}; return h }(),
				Node: node(drainedNode)},
			phase: store.PhaseStuck, write: true,
		},
		{
			name: "stuck with the node down stays stuck",
			in: Input{Plan: plan(store.PhaseStuck, nil), Host: host("b1", true),
				Node: node(func(n *NodeView) { drainedNode(n); n.Status = "down" })},
			phase: store.PhaseStuck,
		},
		{
			name:  "stuck without a node or a server keeps no slot: abandoned, backing off",
			in:    Input{Plan: plan(store.PhaseStuck, func(p *store.Plan) { p.LastError = "the host did not come back" }), Host: host("b1", true)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if d.History == nil || d.History.Outcome != "abandoned" || !strings.Contains(d.Plan.LastError, "the host did not come back") ||
					!d.Plan.NextTry.After(t0) || d.Plan.Active() {
					t.Errorf("history %+v, plan %+v", d.History, d.Plan)
				}
			},
		},
		{
			name: "timed out without a node or a server: abandoned at once, never stuck",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }),
				Host: func() *store.HostRecord { h := host("b1", true); h.RebootingGrant = "g1"; return h }()},
			phase: store.PhaseBackoff, write: true,
		},
		{
			name: "stuck without a node but with a server stays stuck: its cluster's quorum needs the slot",
			in: Input{Plan: plan(store.PhaseStuck, nil), Host: func() *store.HostRecord {
				h := host("b1", true)
				h.Servers = []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}
				return h
			}()},
			phase: store.PhaseStuck,
		},
		{
			name:  "a hold is shown, recorded once, and keeps the slot",
			in:    Input{Plan: plan(store.PhaseRebooting, nil), Host: holdingHost("quorum gate: nomad: no leader"), Node: node(drainedNode)},
			phase: store.PhaseRebooting, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.Plan.Held || !strings.Contains(d.Waiting.String(), "no leader") || !d.Plan.Active() {
					t.Errorf("held %v waiting %q", d.Plan.Held, d.Waiting)
				}
			},
		},
		{
			name: "a hold shorter than rejoin_timeout is not stuck while the agent says why",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.Held = true; p.PhaseSince = t0.Add(-29 * time.Minute) }),
				Host: holdingHost("quorum gate: nomad: no leader"), Node: node(drainedNode)},
			phase: store.PhaseRebooting,
			check: func(t *testing.T, d Decision) {
				if !d.RecheckAt.Equal(t0.Add(time.Minute)) {
					t.Errorf("recheck at %s, want when rejoin_timeout runs out (%s)", d.RecheckAt, t0.Add(time.Minute))
				}
			},
		},
		{
			name: "a hold of rejoin_timeout ends the attempt: node given back, history, slot freed, backoff",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.Held = true; p.PhaseSince = t0.Add(-30 * time.Minute) }),
				Host: holdingHost("quorum gate: nomad: no leader"), Node: node(drainedNode)},
			phase: store.PhaseBackoff, write: true,
			check: func(t *testing.T, d Decision) {
				if !d.SetEligible || d.CancelDrain {
					t.Errorf("set eligible %v, cancel drain %v: want eligibility restored only", d.SetEligible, d.CancelDrain)
				}
				if d.History == nil || d.History.Outcome != "held" || !strings.Contains(d.History.Error, "held the reboot for 30m0s: quorum gate: nomad: no leader") {
					t.Errorf("history = %+v", d.History)
				}
				if d.Plan.Active() || d.Plan.Held || !d.Plan.NextTry.Equal(t0.Add(time.Minute)) ||
					!strings.Contains(d.Plan.LastError, "no leader") {
					t.Errorf("plan = %+v: want backing off, the slot freed, the hold in its last error", d.Plan)
				}
			},
		},

		{
			name: "when the hold ends the time to come back counts from then",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.Held = true; p.PhaseSince = t0.Add(-2 * time.Hour) }),
				Host: func() *store.HostRecord { h := host("b1", true); h.RebootingGrant = "g1"; return h }(),
				Node: node(func(n *NodeView) { drainedNode(n); n.Status = "down" })},
			phase: store.PhaseRebooting, write: true,
			check: func(t *testing.T, d Decision) {
				if d.Plan.Held || !d.Plan.PhaseSince.Equal(t0) {
					t.Errorf("held %v since %s", d.Plan.Held, d.Plan.PhaseSince)
				}
			},
		},
		{
			name: "a hold of a host whose node went down does not count",
			in: Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { p.PhaseSince = t0.Add(-31 * time.Minute) }),
				Host: holdingHost("x"), Node: node(func(n *NodeView) { drainedNode(n); n.Status = "down" })},
			phase: store.PhaseStuck, write: true,
		},
		{
			name: "no grant when the agent's system job does not run on the node",
			in: Input{Plan: plan(store.PhasePending, nil), Host: func() *store.HostRecord {
				h := host("b1", true)
				h.AgentJob = "default/rollboot"
				return h
			}(), Node: node(nil), Admitted: true, NewGrantID: "g2", SystemJobs: []string{"default/exporter"}},
			phase: store.PhasePending,
			check: func(t *testing.T, d Decision) {
				if d.StartDrain || !strings.Contains(d.Waiting.String(), "no agent to reboot it") {
					t.Errorf("start drain %v, waiting %q", d.StartDrain, d.Waiting)
				}
			},
		},
		{
			name: "a grant when the agent's system job runs on the node",
			in: Input{Plan: plan(store.PhasePending, nil), Host: func() *store.HostRecord {
				h := host("b1", true)
				h.AgentJob = "default/rollboot"
				return h
			}(), Node: node(nil), Admitted: true, NewGrantID: "g2", SystemJobs: []string{"default/exporter", "default/rollboot"}},
			phase: store.PhaseDraining, write: true,
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

package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

func TestRecheckAt(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	abort := Timing{DrainDeadline: time.Hour, RejoinTimeout: 10 * time.Minute}
	force := abort
	force.ForceOnTimeout = true
	healthy := rejoin.Settings{Deadline: 8 * time.Minute, OnDeadline: rejoin.OnDeadlineHold}
	rejoining := store.Plan{Host: "a", Phase: store.PhaseRejoining, PhaseSince: now,
		Timeline: map[string]time.Time{store.PhaseRejoining: now.Add(-5 * time.Minute)}}
	cases := []struct {
		name    string
		plan    store.Plan
		timing  Timing
		healthy rejoin.Settings
		want    time.Time
	}{
		{"idle waits on nothing", store.Plan{Host: "a", Phase: store.PhaseIdle, PhaseSince: now.Add(-time.Hour)}, abort, healthy, time.Time{}},
		{"stuck waits on nothing", store.Plan{Host: "a", Phase: store.PhaseStuck, PhaseSince: now.Add(-time.Hour)}, abort, healthy, time.Time{}},
		{"backoff: its next try", store.Plan{Host: "a", Phase: store.PhaseBackoff, NextTry: now.Add(time.Minute)}, abort, healthy, now.Add(time.Minute)},
		{"backoff after an interruption past the drain: its wait for the node's word ends at the rejoin timeout",
			store.Plan{Host: "a", Phase: store.PhaseBackoff, PhaseSince: now.Add(-time.Minute), NextTry: now.Add(time.Hour), GrantID: "g1", BootIDAtGrant: "b1",
				LastError: interruptedPrefix + "the node was made eligible again", Timeline: map[string]time.Time{store.PhaseDrained: now.Add(-2 * time.Minute)}},
			abort, healthy, now.Add(9 * time.Minute)},
		{"pending with a next try in the past: nothing", store.Plan{Host: "a", Phase: store.PhasePending, NextTry: now.Add(-time.Minute)}, abort, healthy, time.Time{}},
		{"draining with abort: the drain deadline", store.Plan{Host: "a", Phase: store.PhaseDraining, PhaseSince: now.Add(-time.Minute)}, abort, healthy, now.Add(59 * time.Minute)},
		{"draining with force: Nomad's deadline ends the drain", store.Plan{Host: "a", Phase: store.PhaseDraining, PhaseSince: now.Add(-time.Minute)}, force, healthy, time.Time{}},
		{"drained: the rejoin timeout", store.Plan{Host: "a", Phase: store.PhaseDrained, PhaseSince: now}, abort, healthy, now.Add(10 * time.Minute)},
		{"rejoining: the healthy deadline, from when it started rejoining", rejoining, abort, healthy, now.Add(3 * time.Minute)},
		{"rejoining: the rejoin timeout when it comes first", rejoining, abort, rejoin.Settings{Deadline: time.Hour}, now.Add(5 * time.Minute)},
		{"a timeout already passed: nothing to wait for", store.Plan{Host: "a", Phase: store.PhaseRebooting, PhaseSince: now.Add(-time.Hour)}, abort, healthy, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Plan: tc.plan, Timing: tc.timing, Healthy: tc.healthy}
			if got := recheckAt(in, tc.plan); !got.Equal(tc.want) {
				t.Errorf("recheckAt = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pass at a decision's RecheckAt sees its deadline run out, and one just
// before does not: the loop needs no tick of its own past the deadline.
func TestStepAtRecheckAt(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	timing := Timing{DrainDeadline: time.Hour, RejoinTimeout: 10 * time.Minute}
	cases := []struct {
		name string
		plan store.Plan
		node *NodeView
	}{
		{"a drain past its deadline is aborted", store.Plan{Host: "a", Phase: store.PhaseDraining, PhaseSince: start, GrantID: "g"},
			&NodeView{ID: "n", Status: "ready", Draining: true, DrainGrant: "g"}},
		{"a host not rebooting within the timeout is stuck", store.Plan{Host: "a", Phase: store.PhaseRebooting, PhaseSince: start, GrantID: "g", BootIDAtGrant: "b1"},
			&NodeView{ID: "n", Status: "down"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: start, Plan: tc.plan, Node: tc.node, Timing: timing,
				Host: &store.HostRecord{Host: "a", BootID: "b1", RebootRequired: true, RequestedAt: start.Add(-time.Hour)}}
			first := Step(in)
			if first.RecheckAt.IsZero() || first.Plan.Phase != tc.plan.Phase {
				t.Fatalf("at the start: phase %s, recheck %v", first.Plan.Phase, first.RecheckAt)
			}
			in.Now = first.RecheckAt.Add(-time.Nanosecond)
			if d := Step(in); d.Plan.Phase != tc.plan.Phase {
				t.Fatalf("just before RecheckAt the host moved to %s", d.Plan.Phase)
			}
			in.Now = first.RecheckAt
			if d := Step(in); d.Plan.Phase == tc.plan.Phase {
				t.Fatalf("at RecheckAt the host is still %s (%s)", d.Plan.Phase, d.Waiting)
			}
		})
	}
}

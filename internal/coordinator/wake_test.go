package coordinator

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestNextTimer(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	abort := Timing{DrainDeadline: time.Hour, RejoinTimeout: 10 * time.Minute}
	force := abort
	force.ForceOnTimeout = true
	ms := time.Millisecond
	cases := []struct {
		name   string
		plans  []store.Plan
		timing Timing
		want   time.Time
	}{
		{"no plans", nil, abort, time.Time{}},
		{"idle and stuck hosts wait on nothing", []store.Plan{
			{Host: "a", Phase: store.PhaseIdle, PhaseSince: now.Add(-time.Hour)},
			{Host: "b", Phase: store.PhaseStuck, PhaseSince: now.Add(-time.Hour)},
		}, abort, time.Time{}},
		{"backoff: its next try", []store.Plan{{Host: "a", Phase: store.PhaseBackoff, NextTry: now.Add(time.Minute)}}, abort, now.Add(time.Minute)},
		{"pending with a next try in the past: nothing", []store.Plan{{Host: "a", Phase: store.PhasePending, NextTry: now.Add(-time.Minute)}}, abort, time.Time{}},
		{"draining with abort: the drain deadline", []store.Plan{{Host: "a", Phase: store.PhaseDraining, PhaseSince: now.Add(-time.Minute)}}, abort, now.Add(59*time.Minute + ms)},
		{"draining with force: Nomad's deadline ends the drain", []store.Plan{{Host: "a", Phase: store.PhaseDraining, PhaseSince: now.Add(-time.Minute)}}, force, time.Time{}},
		{"drained: the rejoin timeout", []store.Plan{{Host: "a", Phase: store.PhaseDrained, PhaseSince: now}}, abort, now.Add(10*time.Minute + ms)},
		{"rejoining: from when it started rejoining", []store.Plan{{Host: "a", Phase: store.PhaseRejoining, PhaseSince: now,
			Timeline: map[string]time.Time{store.PhaseRejoining: now.Add(-5 * time.Minute)}}}, abort, now.Add(5*time.Minute + ms)},
		{"a timeout already passed: nothing to wait for", []store.Plan{{Host: "a", Phase: store.PhaseRebooting, PhaseSince: now.Add(-time.Hour)}}, abort, time.Time{}},
		{"the earliest of several", []store.Plan{
			{Host: "a", Phase: store.PhaseBackoff, NextTry: now.Add(time.Hour)},
			{Host: "b", Phase: store.PhaseRebooting, PhaseSince: now.Add(-9 * time.Minute)},
			{Host: "c", Phase: store.PhaseDraining, PhaseSince: now},
		}, abort, now.Add(time.Minute + ms)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans := map[string]store.Plan{}
			for _, p := range tc.plans {
				plans[p.Host] = p
			}
			if got := nextTimer(plans, tc.timing, now); !got.Equal(tc.want) {
				t.Errorf("nextTimer = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAfterPass(t *testing.T) {
	for _, tc := range []struct {
		name            string
		changed         bool
		chained         int
		poked           bool
		again, spinning bool
	}{
		{"nothing changed: wait", false, 0, false, false, false},
		{"nothing changed after a chain: wait, no spin", false, maxChainedPasses, false, false, false},
		{"a change: decide again at once", true, 0, false, true, false},
		{"the last pass of a chain still chains", true, maxChainedPasses - 1, false, true, false},
		{"a long chain of own writes only: a spin", true, maxChainedPasses, false, false, true},
		{"a long chain while others write: progress", true, maxChainedPasses, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			again, spinning := afterPass(tc.changed, tc.chained, tc.poked)
			if again != tc.again || spinning != tc.spinning {
				t.Errorf("afterPass(%v, %d, %v) = again %v, spinning %v; want %v, %v",
					tc.changed, tc.chained, tc.poked, again, spinning, tc.again, tc.spinning)
			}
		})
	}
}

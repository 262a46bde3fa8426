package coordinator

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// TestRebootLoopGuard: only the need that was still there right after rollboot's
// reboot counts as a loop; a later need is a new request, and a clean cycle resets
// the count.
func TestRebootLoopGuard(t *testing.T) {
	done := t0.Add(-10 * time.Minute) // the last cycle finished then
	idleAfter := func(needAt time.Time, count int) store.Plan {
		return plan(store.PhaseIdle, func(p *store.Plan) {
			p.LastAfterBootID, p.LastCompleted, p.LastNeedAt, p.LoopCount = "b2", done, needAt, count
		})
	}
	need := func(boot string, at time.Time) *store.HostRecord {
		h := host(boot, true)
		h.RequestedAt = at
		return h
	}
	tests := []struct {
		name      string
		in        phase.Input
		loop      bool
		wantCount int
	}{
		{
			name: "need still there right after the boot is a loop",
			in:   phase.Input{Plan: idleAfter(done.Add(-time.Second), 0), Host: need("b2", done.Add(-time.Second))},
			loop: true, wantCount: 1,
		},
		{
			name: "a need first seen seven minutes after a clean reboot is no loop",
			in:   phase.Input{Plan: idleAfter(time.Time{}, 0), Host: need("b2", done.Add(7*time.Minute))},
			loop: false, wantCount: 0,
		},
		{
			name: "a new need after a looping one is no loop and resets the count",
			in:   phase.Input{Plan: idleAfter(done.Add(-time.Second), 3), Host: need("b2", done.Add(7*time.Minute))},
			loop: false, wantCount: 0,
		},
		{
			name: "the same need after another boot is no loop",
			in:   phase.Input{Plan: idleAfter(done.Add(-time.Second), 2), Host: need("b3", done.Add(-time.Second))},
			loop: false, wantCount: 0,
		},
		{
			name: "a manual request after the cycle is a new request",
			in: phase.Input{Plan: idleAfter(done.Add(-time.Second), 0), Host: need("b2", done.Add(-time.Second)),
				Request: &store.Request{At: done.Add(time.Minute)}},
			loop: false, wantCount: 0,
		},
		{
			name: "a plan written before the guard knew the need is no loop",
			in:   phase.Input{Plan: idleAfter(time.Time{}, 1), Host: need("b2", done.Add(-time.Hour))},
			loop: false, wantCount: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Timing, tt.in.Node = t0, timing, node(nil)
			d := phase.Step(tt.in)
			if d.Plan.Phase != store.PhasePending {
				t.Fatalf("phase = %s, want pending", d.Plan.Phase)
			}
			if got := d.Event == "reboot loop detected"; got != tt.loop {
				t.Errorf("loop = %v (event %q), want %v", got, d.Event, tt.loop)
			}
			if d.Plan.LoopCount != tt.wantCount {
				t.Errorf("loop count = %d, want %d", d.Plan.LoopCount, tt.wantCount)
			}
			if !tt.loop && !d.Plan.NextTry.IsZero() {
				t.Errorf("held until %v without a loop", d.Plan.NextTry)
			}
		})
	}
}

// TestLoopGuardArmedAtCycleEnd: the end of a cycle records the need the host
// still shows after its reboot, and a clean cycle resets the count.
func TestLoopGuardArmedAtCycleEnd(t *testing.T) {
	tests := []struct {
		name       string
		host       *store.HostRecord
		wantNeedAt time.Time
		wantCount  int
	}{
		{name: "clean cycle resets the count", host: host("b2", false), wantCount: 0},
		{name: "need still there is remembered", host: host("b2", true), wantNeedAt: t0.Add(-time.Hour), wantCount: 2},
		{name: "finished on the node's word knows no new need", host: host("b1", true), wantCount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := phase.Input{Now: t0, Timing: timing, Host: tt.host,
				Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.LoopCount, p.EligibleBefore = 2, false }),
				Node: node(func(n *phase.NodeView) { n.Eligible = false })}
			d := phase.Step(in)
			if d.Plan.Phase != store.PhaseIdle {
				t.Fatalf("phase = %s (waiting %q), want idle", d.Plan.Phase, d.Waiting)
			}
			if !d.Plan.LastNeedAt.Equal(tt.wantNeedAt) || d.Plan.LoopCount != tt.wantCount {
				t.Errorf("need at %v count %d, want %v %d", d.Plan.LastNeedAt, d.Plan.LoopCount, tt.wantNeedAt, tt.wantCount)
			}
		})
	}
}

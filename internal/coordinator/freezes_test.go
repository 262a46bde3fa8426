package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
)

// A freeze starting changes neither the plans nor the pause, yet the notifier
// is handed it: a pass runs at the freeze's start (the wake timer, with no host
// queued) and hands the freezes in force; the next pass, nothing moved, hands
// nothing; the pass at its end hands the state without it.
func TestFreezeHandedAtItsStartAndEnd(t *testing.T) {
	cl := newBenchCluster(t, 2)
	// A freeze's times are whole seconds.
	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	end := start.Add(time.Second)
	day := func(at time.Time) policy.Date {
		y, m, d := at.Date()
		midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return policy.Date{Year: y, Month: m, Day: d, Clock: at.Sub(midnight), HasClock: true}
	}
	groups := append([]rules.GroupSpec(nil), cl.groups...)
	groups[1].Group.Freezes = policy.Freezes{{Name: "launch", From: day(start), To: day(end)}}
	h := &handedOn{}
	co := New(Options{
		Deps: Deps{Nodes: cl.client.Nodes(), Store: cl.store, Notifier: h},
		Rules: rules.Rules{
			Groups: groups,
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
	})
	ctx := t.Context()
	if _, err := co.watchVars(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := co.watchNodes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pass := func(what string) {
		t.Helper()
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// wake waits for the next pass as the loop does, with no change to see
	// and no resync: only a timer can end it.
	wake := func(what string, at time.Time) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if !co.waitForPass(wctx, nil, nil, 0) {
			t.Fatalf("%s: no pass was woken by 10 s", what)
		}
		if now := time.Now(); now.Before(at) {
			t.Fatalf("%s: woken at %s, before %s", what, now.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		}
	}

	pass("before the freeze")
	if len(h.states) != 1 || len(h.states[0].Freezes) != 0 {
		t.Fatalf("before the freeze: handed %+v", h.states)
	}
	if !co.freezeRecheck.Equal(start) {
		t.Fatalf("next look at %s, want the freeze's start %s", co.freezeRecheck, start)
	}
	wake("the freeze's start", start)
	pass("at the freeze's start")
	if len(h.states) != 2 {
		t.Fatalf("at the freeze's start: handed %d states, want 2", len(h.states))
	}
	fs := h.states[1].Freezes
	if len(fs) != 1 || fs[0].Name != "launch" || len(fs[0].Groups) != 1 || fs[0].Groups[0] != groups[1].Group.Name ||
		!fs[0].Start.Equal(start) || !fs[0].End.Equal(end) || h.states[1].At.Before(start) {
		t.Fatalf("at the freeze's start: handed freezes %+v at %s", fs, h.states[1].At)
	}
	pass("nothing moved")
	if len(h.states) != 2 {
		t.Fatalf("nothing moved: handed %d states, want 2", len(h.states))
	}
	wake("the freeze's end", end)
	pass("at the freeze's end")
	if len(h.states) != 3 || len(h.states[2].Freezes) != 0 {
		t.Fatalf("at the freeze's end: handed %+v", h.states[2:])
	}
	if !co.freezeRecheck.IsZero() {
		t.Errorf("after a one-off freeze: next look at %s, want none", co.freezeRecheck)
	}
}

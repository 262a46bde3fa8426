package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wave"
)

// A new leader reads <prefix>/waves once and keeps what the last one recorded:
// the canary it granted, still out, holds the rest of its wave; once the
// canary's cycle fails, the failure is stored before anything is admitted, and
// halts the group once, until the operator's resume.
func TestWavesKeptAcrossLeaders(t *testing.T) {
	_, _, st := simStore(t, nomadsim.Config{Servers: 1})
	ctx := context.Background()
	waves := wave.Rules{"web": {Canaries: 1}}
	before := wave.State{Waves: []wave.Wave{{Group: "web", Fingerprint: "k1", Seen: t0,
		Members: []wave.Member{{Host: "a", At: t0, Canary: true}}}}}
	if _, err := st.PutWaves(ctx, wave.Items(before), 0); err != nil {
		t.Fatal(err)
	}
	c := New(Options{Deps: Deps{Store: st},
		Rules: rules.Rules{Groups: []rules.GroupSpec{{Group: policy.Group{Name: "web", Concurrency: 3}, Options: rules.GroupOptions{Wave: waves["web"]}}}}})
	snap := func(aPhase string) *snapshot {
		s := &snapshot{now: t0.Add(time.Minute), plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
		for _, h := range []string{"a", "b"} {
			s.names = append(s.names, h)
			s.hosts[h] = &hostView{group: "web", rec: &store.HostRecord{Host: h, RebootRequired: true, Fingerprint: "k1"}}
			s.plans[h] = store.Plan{Host: h, Phase: store.PhasePending, Group: "web", PhaseSince: t0.Add(-time.Minute)}
		}
		s.plans["a"] = store.Plan{Host: "a", Phase: aPhase, Group: "web", PhaseSince: t0.Add(30 * time.Second), LastError: "the host did not come back within 20s"}
		return s
	}
	queue := []admission.Pending{{Request: policy.Request{Host: "b", Group: "web"}, Rec: &store.HostRecord{Host: "b", RebootRequired: true, Fingerprint: "k1"}}}

	s := snap(store.PhaseRebooting)
	c.readHalts(ctx, s)
	c.observeWaves(ctx, s)
	c.storeWaves(ctx, s)
	if holds, _ := waveHolds(s, queue); holds["b"].Kind != phase.WaitCanary || !strings.Contains(holds["b"].Detail, "a (") {
		t.Fatalf("b: %v, want it to wait for the canary the last leader granted", holds)
	}
	s = snap(store.PhaseStuck)
	c.readHalts(ctx, s)
	c.observeWaves(ctx, s)
	c.storeWaves(ctx, s)
	if holds, _ := waveHolds(s, queue); holds["b"].Kind != phase.WaitCanaryFailed {
		t.Fatalf("b: %v, want the canary's failure to hold it", holds)
	}
	items, _, err := st.Waves(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := wave.FromItems(items)
	if w, _ := stored.Wave("web", "k1"); !strings.Contains(w.Failed, "stuck") {
		t.Fatalf("stored wave %+v: the failure is not stored", w)
	}
	s = snap(store.PhaseStuck)
	c.readHalts(ctx, s)
	c.observeWaves(ctx, s)
	c.storeWaves(ctx, s)
	hs, _, err := st.Halts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := hs.Halts["web"]; !ok || !strings.HasPrefix(h.Reason, "canary a of wave k1 failed: stuck") || len(hs.Log) != 1 {
		t.Fatalf("halts %+v, want the group halted once by its canary", hs)
	}
	// The operator resumes the group: the failure is forgotten and stored so,
	// and b goes as the wave's new canary (a, released, needs it no more).
	if _, err := st.UpdateHalts(ctx, func(hs policy.HaltState) (policy.HaltState, bool) {
		return must(policy.Lift(hs, "web", policy.Resume{At: t0.Add(2 * time.Minute), By: "operator"}))
	}); err != nil {
		t.Fatal(err)
	}
	s = snap(store.PhaseIdle)
	s.now = t0.Add(3 * time.Minute)
	s.hosts["a"].rec.RebootRequired = false
	c.readHalts(ctx, s)
	c.observeWaves(ctx, s)
	c.storeWaves(ctx, s)
	if holds, _ := waveHolds(s, queue); len(holds) != 0 {
		t.Fatalf("after the resume: %v, want b to go", holds)
	}
	items, _, _ = st.Waves(ctx)
	stored, _ = wave.FromItems(items)
	if w, _ := stored.Wave("web", "k1"); w.Failed != "" {
		t.Fatalf("stored wave %+v: the failure outlived the resume", w)
	}
}

// must is st as Lift returned it, changed.
func must(st policy.HaltState, _ bool) (policy.HaltState, bool) { return st, true }

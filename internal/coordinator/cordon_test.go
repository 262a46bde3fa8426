package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/sideoutput"
	"github.com/rollboot/rollboot/internal/store"
)

// A pass carries the cordons of the hosts next in line out before its other
// decisions, drains among them, which keep their host order.
func TestCordonsFirst(t *testing.T) {
	w := func(host string, cordon, drain bool) pendingWrite {
		return pendingWrite{in: phase.Input{Plan: store.Plan{Host: host}}, d: phase.Decision{Cordon: cordon, StartDrain: drain}}
	}
	got := cordonsFirst([]pendingWrite{w("a", false, true), w("b", true, false), w("c", false, true), w("d", true, false)})
	var order []string
	for _, x := range got {
		order = append(order, x.in.Plan.Host)
	}
	if want := []string{"b", "d", "a", "c"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}

// handOutWithCordons runs one pass over h00 rejoining and back (its cycle
// closes), h01 and h02 pending after it, with cordon_next = n, and returns
// the plans after the pass and its node writes.
func handOutWithCordons(t *testing.T, n int) (map[string]store.Plan, []string) {
	t.Helper()
	ctx := context.Background()
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 3, func(i int, r *store.HostRecord) {
		backAndNextRecords(nil)(min(i, 1), r)
		r.RequestedAt = t0.Add(-time.Hour + time.Duration(i)*time.Minute)
	})
	putBackAndNext(t, st, store.PhaseRejoining)
	third := store.Plan{Host: "h02", Phase: store.PhasePending, Group: "default", PhaseSince: t0.Add(-time.Hour),
		RequestedAt: t0.Add(-time.Hour + 2*time.Minute), Reason: "kernel", Timeline: map[string]time.Time{store.PhasePending: t0.Add(-time.Hour)}}
	if _, err := st.PutPlan(ctx, third); err != nil {
		t.Fatal(err)
	}
	c := New(Options{
		Deps: Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules: rules.Rules{Timing: timing, Capacity: rules.CapacityGate{Enabled: true},
			MetaKeys: sideoutput.MetaRules{CordonNext: n}},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	return plansAndNodeCalls(t, st, log)
}

// A pass whose cycle closes hands the slot to the host next in line and
// cordons the host after it, before that drain starts; the host granted had
// been cordoned by the same pass, as next in line then, and its cordon
// becomes part of its drain. A host the pass cordoned already is not
// cordoned again by the hand-out, though its node as the pass read it is
// still eligible.
func TestHandOutCordonsTheNextHostBeforeTheDrain(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("cordon_next=%d", n), func(t *testing.T) {
			plans, nodeWrites := handOutWithCordons(t, n)
			if want := []string{"ineligible n-h01", "ineligible n-h02", "drain n-h01"}; !slices.Equal(nodeWrites, want) {
				t.Errorf("node writes %q, want %q", nodeWrites, want)
			}
			if p := plans["h01"]; p.Phase != store.PhaseDraining || !p.EligibleBefore || !p.CordonedAt.IsZero() {
				t.Errorf("h01: %s, eligible before %t, cordoned at %v; want draining, eligible before, no cordon", p.Phase, p.EligibleBefore, p.CordonedAt)
			}
			if p := plans["h02"]; p.Phase != store.PhasePending || p.CordonNode != "n-h02" {
				t.Errorf("h02: %s, cordon of %q; want pending, cordoned", p.Phase, p.CordonNode)
			}
		})
	}
}

// A host next in line left without a cordon says why in its plan and is
// counted: here the capacity gate is off (a policy refuses that; the
// coordinator still holds the cordon, failing closed), so nothing tells that
// the other nodes can spare its node.
func TestNotCordonedIsCountedAndSaid(t *testing.T) {
	ctx := context.Background()
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 3, func(i int, r *store.HostRecord) {
		r.BootID, r.RebootRequired, r.RequestedAt = "b1", true, t0.Add(-time.Hour+time.Duration(i)*time.Minute)
	})
	for i := range 3 {
		name := fmt.Sprintf("h%02d", i)
		p := store.Plan{Host: name, Phase: store.PhasePending, Group: "default", PhaseSince: t0.Add(-time.Hour),
			RequestedAt: t0.Add(-time.Hour + time.Duration(i)*time.Minute), Reason: "kernel",
			Timeline: map[string]time.Time{store.PhasePending: t0.Add(-time.Hour)}}
		if i == 0 {
			p.Phase, p.GrantID, p.NodeID = store.PhaseDraining, "g0", "n-h00"
		}
		if _, err := st.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing, MetaKeys: sideoutput.MetaRules{CordonNext: 1}}, // the capacity gate off
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	plans, nodeWrites := plansAndNodeCalls(t, st, log)
	for _, w := range nodeWrites {
		if strings.HasPrefix(w, "ineligible") {
			t.Errorf("node write %q: no node may be cordoned without the capacity gate", w)
		}
	}
	if p := plans["h01"]; !strings.Contains(p.NoCordon, "the capacity gate is off") || !p.CordonedAt.IsZero() {
		t.Errorf("h01: no cordon %q, cordoned at %v; want why it has none", p.NoCordon, p.CordonedAt)
	}
	if got := testutil.ToFloat64(c.metrics.NotCordoned); got != 1 {
		t.Errorf("rollboot_coordinator_next_not_cordoned = %v, want 1", got)
	}
}

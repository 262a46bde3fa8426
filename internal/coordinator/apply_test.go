package coordinator

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// applyCase is a decision of the phase machine, applied to a fresh store.
type applyCase struct {
	name    string
	in      phase.Input
	request bool // h1 has a manual request, made before its drain
	release bool // h1 has a release, asked now
	want    []string
}

func applyCases() []applyCase {
	drainedNode := func(n *phase.NodeView) { n.Eligible, n.DrainStatus, n.DrainGrant = false, "complete", "g1" }
	drainingNode := func(n *phase.NodeView) {
		n.Eligible, n.Draining, n.DrainStatus, n.DrainGrant = false, true, "draining", "g1"
	}
	leader := host("b1", true)
	leader.Servers = []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}
	rejoining := plan(store.PhaseRejoining, func(p *store.Plan) { p.Timeline[store.PhaseDraining] = t0.Add(-50 * time.Minute) })
	// A hold stored before: the plan is written to forget it, in order with the
	// other writes (a host on its way stores no reason, wait.go).
	held := func(p *store.Plan) { p.Waiting = "paused" }
	queued := phase.WaitFor(phase.WaitQueued, `"web"`)
	cordoned := func(p *store.Plan) { p.GrantID, p.CordonedAt, p.CordonNode = "", t0.Add(-time.Minute), "n1" }
	return []applyCase{
		{
			name: "cordon of the host next in line: the plan records it before the node is made ineligible",
			in: phase.Input{Plan: plan(store.PhasePending, func(p *store.Plan) { p.GrantID = "" }), Host: host("b1", true),
				Node: node(nil), Cordon: true, NotAdmitted: queued},
			want: []string{"put plan/h1", "ineligible n1"},
		},
		{
			name: "cordon no longer wanted: the node is given back before the plan forgets it",
			in: phase.Input{Plan: plan(store.PhasePending, cordoned), Host: host("b1", true),
				Node: node(func(n *phase.NodeView) { n.Eligible = false }), NotAdmitted: queued},
			want: []string{"eligible n1", "put plan/h1"},
		},
		{
			name: "grant: the plan is stored before the drain",
			in: phase.Input{Plan: plan(store.PhasePending, func(p *store.Plan) { p.GrantID = "" }), Host: host("b1", true),
				Node: node(nil), Admitted: true, NewGrantID: "g2"},
			want: []string{"put plan/h1", "drain n1"},
		},
		{
			name: "a drain that did not land is issued again after the plan",
			in:   phase.Input{Plan: plan(store.PhaseDraining, held), Host: host("b1", true), Node: node(nil)},
			want: []string{"put plan/h1", "drain n1"},
		},
		{
			name: "the leadership is handed over after the plan",
			in: phase.Input{Plan: plan(store.PhaseDraining, held), Host: leader, Node: node(drainedNode),
				ServerGates: true, Leads: []string{"nomad"}},
			want: []string{"put plan/h1", "hand over nomad"},
		},
		{
			name: "canceled while draining: the drain is canceled and the cycle recorded before the plan forgets the grant",
			in:   phase.Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", false), Node: node(drainingNode)},
			want: []string{"cancel drain n1 (eligible)", "put history", "put plan/h1"},
		},
		{
			name: "a failed attempt: the drain is canceled and the cycle recorded before the plan backs off",
			in:   phase.Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(drainingNode)},
			want: []string{"cancel drain n1 (eligible)", "put history", "put plan/h1"},
		},
		{
			name: "the drain deadline passed: the drain is canceled before the plan backs off",
			in: phase.Input{Plan: plan(store.PhaseDraining, func(p *store.Plan) { p.PhaseSince = t0.Add(-time.Hour) }),
				Host: host("b1", true), Node: node(drainingNode)},
			want: []string{"cancel drain n1 (eligible)", "put plan/h1"},
		},
		{
			name: "rejoining: eligibility is restored before the plan moves on",
			in:   phase.Input{Plan: plan(store.PhaseRejoining, held), Host: host("b2", false), Node: node(drainedNode)},
			want: []string{"eligible n1", "put plan/h1"},
		},
		{
			name:    "the cycle ends: the request is cleared and the history written before the plan forgets the cycle",
			in:      phase.Input{Plan: rejoining, Host: host("b2", false), Node: node(nil)},
			request: true,
			want:    []string{"delete requests/h1", "put history", "put plan/h1"},
		},
		{
			name: "release: eligibility, request and history before the plan forgets the cycle, the release after it",
			in: phase.Input{Plan: plan(store.PhaseStuck, nil), Host: host("b1", true),
				Node: node(func(n *phase.NodeView) { n.Eligible, n.Status = false, "down" })},
			request: true, release: true,
			want: []string{"eligible n1", "put requests/h1", "put history", "put plan/h1", "delete requests/h1"},
		},
	}
}

// applyFixture stores tc's plan and control state, and returns a coordinator
// whose writes go to log, with the input as stored.
func applyFixture(t *testing.T, tc applyCase) (*Coordinator, *callLog, *memVars, phase.Input) {
	t.Helper()
	log := &callLog{}
	vars := newMemVars(log)
	st := store.New(vars, "rollboot", "")
	c := New(Options{
		Deps:  Deps{Nodes: recNodes{log: log}, Store: st, Clusters: &recClusters{log: log}},
		Rules: rules.Rules{Timing: timing},
	})
	ctx := context.Background()
	in := tc.in
	in.Now, in.Timing = t0, timing
	idx, err := st.PutPlan(ctx, in.Plan)
	if err != nil {
		t.Fatal(err)
	}
	in.Plan.ModifyIndex = idx
	c.plans = map[string]store.Plan{in.Plan.Host: in.Plan}
	if tc.request || tc.release {
		_, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
			if tc.request {
				ctl.Requests = map[string]store.Request{"h1": {At: t0.Add(-55 * time.Minute)}}
				r := ctl.Requests["h1"]
				in.Request = &r
			}
			if tc.release {
				ctl.Releases = map[string]time.Time{"h1": t0}
				in.ReleaseAt = t0
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, log, vars, in
}

// TestApplyOrder: apply's writes come in the crash-safe order, and a write that
// fails stops every later one: a step that takes a node out of service never
// runs before the plan that records it is stored, and the plan never forgets
// what is not given back and recorded yet.
func TestApplyOrder(t *testing.T) {
	for _, tc := range applyCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, log, _, in := applyFixture(t, tc)
			log.reset(0)
			if err := c.apply(context.Background(), in, phase.Step(in)); err != nil {
				t.Fatal(err)
			}
			if got := log.get(); !slices.Equal(got, tc.want) {
				t.Fatalf("writes %q, want %q", got, tc.want)
			}
			for i := 1; i <= len(tc.want); i++ {
				c, log, vars, in := applyFixture(t, tc)
				log.reset(i)
				err := c.apply(context.Background(), in, phase.Step(in))
				if !errors.Is(err, errInjected) {
					t.Errorf("failing write %d (%s): apply returned %v", i, tc.want[i-1], err)
				}
				if got := log.get(); !slices.Equal(got, tc.want[:i]) {
					t.Errorf("failing write %d (%s): writes %q, want %q", i, tc.want[i-1], got, tc.want[:i])
				}
				stored := vars.vars["rollboot/plan/h1"].ModifyIndex
				if cached := c.plans["h1"].ModifyIndex; cached != stored {
					t.Errorf("failing write %d: the cached plan (index %d) is not the stored one (%d)", i, cached, stored)
				}
			}
		})
	}
}

// A plan write that loses to another coordinator's stops the decision before
// anything is taken out of service, and forgets the cached plans so that the
// next pass reads them again.
func TestApplyPlanConflict(t *testing.T) {
	cases := applyCases()
	tc := cases[slices.IndexFunc(cases, func(c applyCase) bool { return c.name == "grant: the plan is stored before the drain" })]
	c, log, _, in := applyFixture(t, tc)
	in.Plan.ModifyIndex-- // another coordinator wrote since
	log.reset(0)
	err := c.apply(context.Background(), in, phase.Step(in))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("apply = %v, want a conflict", err)
	}
	if got := log.get(); !slices.Equal(got, []string{"put plan/h1"}) {
		t.Errorf("writes %q, want the plan's only", got)
	}
	if c.plans != nil {
		t.Error("the cached plans were kept after a conflict")
	}
}

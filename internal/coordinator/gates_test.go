package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// TestReconcileServerHosts: one pass reads the health of each cluster a record
// names, once, for its membership and the gates; of two pending
// servers of one cluster the first goes (plan stored, then drained) and the
// second waits for it, with the reason in its plan.
func TestReconcileServerHosts(t *testing.T) {
	log := &callLog{}
	vars := newMemVars(log)
	st := store.New(vars, "rollboot", "")
	ctx := context.Background()
	var stubs []*api.NodeListStub
	for _, h := range []string{"a", "b", "c"} {
		stubs = append(stubs, &api.NodeListStub{ID: "n-" + h, Name: h, Status: "ready", SchedulingEligibility: "eligible"})
	}
	server := func(h, product, cluster, id string) store.HostRecord {
		return store.HostRecord{Host: h, NodeID: "n-" + h, BootID: "b-" + h, RebootRequired: true, Reason: "kernel",
			RequestedAt: t0.Add(-time.Hour), Roles: []string{store.RoleNomadClient, product + "-server"},
			Servers: []store.Server{{Product: product, Cluster: cluster, ID: id}}}
	}
	recs := []store.HostRecord{server("a", "nomad", "global", "s1"), server("b", "nomad", "global", "s2"),
		server("c", "vault", "v", "s1")}
	recs[2].RebootRequired = false // idle: its cluster is not read
	for _, r := range recs {
		if _, err := st.PutHost(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range []string{"a", "b"} {
		at := t0.Add(-time.Hour + time.Duration(i)*time.Minute)
		if _, err := st.PutPlan(ctx, store.Plan{Host: h, Phase: store.PhasePending, PhaseSince: at, RequestedAt: at,
			Reason: "kernel", Timeline: map[string]time.Time{store.PhasePending: at}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: "c", Phase: store.PhaseIdle}); err != nil { // not first seen: no plan to store
		t.Fatal(err)
	}
	clusters := &recClusters{log: log, health: map[string]health.ClusterHealth{
		"nomad/global": cluster(health.Nomad, "global", func(h *health.ClusterHealth) {
			h.Servers[0].Name, h.Servers[1].Name = "a.global", "b.global"
		})}}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st, Clusters: clusters},
		Rules:   rules.Rules{Timing: timing, DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 3}},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Each cluster a record names is read once, to corroborate the records,
	// and the gates use that read.
	if want := map[string]int{"nomad/global": 1, "vault/v": 1}; !maps.Equal(clusters.reads, want) {
		t.Errorf("health reads %v, want %v", clusters.reads, want)
	}
	if got, want := log.get(), []string{"put plan/a", "drain n-a", "put plan/b"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := plans["a"]; p.Phase != store.PhaseDraining || p.Group != policy.DefaultGroupName {
		t.Errorf("a: %s in group %q, want draining in the default group", p.Phase, p.Group)
	}
	if p := plans["b"]; p.Phase != store.PhasePending || p.Waiting != "nomad server of global on a is already out: one at a time" {
		t.Errorf("b: %s waiting %q", p.Phase, p.Waiting)
	}
}

// A hand-over refused for lack of permission is remembered for the host: with
// the "hold" policy the host then waits and says why, with "continue" it goes
// on as leader. Any other error fails the step.
func TestHandOverRefused(t *testing.T) {
	rec := &store.HostRecord{Host: "h1", Servers: []store.Server{{Product: "nomad", Cluster: "global", ID: "s3"}}}
	clusters := map[string]health.ClusterHealth{"nomad/global": cluster(health.Nomad, "global", nil)} // s3 leads
	for _, hold := range []bool{true, false} {
		log := &callLog{}
		c := New(Options{
			Deps:  Deps{Clusters: &recClusters{log: log, handOverErr: health.ErrDenied}},
			Rules: rules.Rules{HoldOnDeniedHandOver: hold},
		})
		if products, blocked := leads(clusters, rec, c.noHandOver, hold); !slices.Equal(products, []string{"nomad"}) || !blocked.IsZero() {
			t.Fatalf("hold=%v, before any refusal: leads %v, blocked %+v", hold, products, blocked)
		}
		if err := c.handOver(context.Background(), rec, "nomad"); err != nil {
			t.Fatalf("hold=%v: a refused hand-over failed the step: %v", hold, err)
		}
		products, blocked := leads(clusters, rec, c.noHandOver, hold)
		switch {
		case hold && (!slices.Equal(products, []string{"nomad"}) || blocked.Kind != phase.WaitHandOverRefused ||
			!strings.Contains(blocked.Detail, health.ErrDenied.Error())):
			t.Errorf("hold: leads %v, blocked %+v", products, blocked)
		case !hold && (len(products) != 0 || !blocked.IsZero()):
			t.Errorf("continue: leads %v, blocked %+v", products, blocked)
		}
	}
	log := &callLog{}
	c := New(Options{Deps: Deps{Clusters: &recClusters{log: log, handOverErr: errors.New("500")}}})
	if err := c.handOver(context.Background(), rec, "nomad"); err == nil || len(c.noHandOver) != 0 {
		t.Errorf("a failed hand-over: %v, remembered %v", err, c.noHandOver)
	}
	if err := c.handOver(context.Background(), nil, "nomad"); err != nil {
		t.Errorf("no record: %v", err)
	}
}

func TestPostGate(t *testing.T) {
	srv := []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}
	stable := t0.Add(-time.Hour)
	healthy := cluster(health.Nomad, "global", func(h *health.ClusterHealth) {
		for i := range h.Servers {
			h.Servers[i].StableSince = stable
		}
	})
	tests := []struct {
		name     string
		rec      store.HostRecord
		clusters map[string]health.ClusterHealth
		want     phase.WaitReason
		kind     phase.WaitKind // when the detail comes from package health
	}{
		{name: "back, healthy and stable", rec: store.HostRecord{Host: "h1", Servers: srv},
			clusters: map[string]health.ClusterHealth{"nomad/global": healthy}},
		{name: "no servers and no error: nothing to wait for", rec: store.HostRecord{Host: "h1"}},
		{name: "discovery failing", rec: store.HostRecord{Host: "h1", Servers: srv, DiscoverError: "EOF"},
			want: phase.WaitFor(phase.WaitRolesUnknown, "EOF")},
		{name: "Vault sealed", rec: store.HostRecord{Host: "h1", VaultSealed: true},
			want: phase.WaitFor(phase.WaitVaultUnseal, "h1")},
		{name: "not back in the Raft configuration", rec: store.HostRecord{Host: "h1", Servers: []store.Server{{Product: "nomad", Cluster: "global", ID: "s9"}}},
			clusters: map[string]health.ClusterHealth{"nomad/global": healthy}, kind: phase.WaitPostRebootGate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := postGate(tc.clusters, &tc.rec, t0, time.Minute)
			if tc.kind != phase.NotWaiting {
				if got.Kind != tc.kind || got.String() == "" {
					t.Errorf("postGate = %+v, want kind %v", got, tc.kind)
				}
				return
			}
			if got != tc.want {
				t.Errorf("postGate = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A read that one host's decision needs fails: that host is skipped this pass and
// the pass reports the error, while the others are decided and applied (here a
// cancel that suppresses nothing any more is forgotten).
func TestReconcileSkipsAHostWhoseReadFails(t *testing.T) {
	log := &callLog{}
	vars := newMemVars(log)
	st := store.New(vars, "rollboot", "")
	ctx := context.Background()
	stubs := []*api.NodeListStub{
		{ID: "n-a", Name: "a", Status: "ready", SchedulingEligibility: "ineligible"},
		{ID: "n-b", Name: "b", Status: "ready", SchedulingEligibility: "eligible"},
	}
	for _, r := range []store.HostRecord{{Host: "a", NodeID: "n-a", BootID: "b1"}, {Host: "b", NodeID: "n-b", BootID: "b1"}} {
		if _, err := st.PutHost(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	drained := plan(store.PhaseDrained, func(p *store.Plan) { p.Host, p.NodeID = "a", "n-a" })
	for _, p := range []store.Plan{drained, {Host: "b", Phase: store.PhaseIdle}} {
		if _, err := st.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
		ctl.Cancels = map[string]time.Time{"b": t0.Add(-time.Minute)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs, failInfo: "n-a"}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	err := c.ReconcileOnce(ctx)
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "read node n-a") {
		t.Errorf("ReconcileOnce = %v, want the failed read of a's node", err)
	}
	if got, want := log.get(), []string{"delete requests/b"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
}

// A rejoining server host whose server is healthy is decided again when its
// stability wait ends, not at the next resync (30 s in production): no watch
// follows the clusters' health.
func TestPostGateRecheckAtStability(t *testing.T) {
	const stableFor = 2 * time.Second
	h := cluster(health.Nomad, "global", func(h *health.ClusterHealth) {
		for i := range h.Servers {
			h.Servers[i].StableSince = t0.Add(-time.Hour)
		}
		h.Servers[0].StableSince = t0.Add(-500 * time.Millisecond)
	})
	rec := &store.HostRecord{Host: "srv1", Servers: []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}}
	why, at := postGate(map[string]health.ClusterHealth{"nomad/global": h}, rec, t0, stableFor)
	if why.Kind != phase.WaitPostRebootGate || !at.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("gate %q, recheck at %s; want closed until %s", why, at, t0.Add(1500*time.Millisecond))
	}
	if why, _ := postGate(map[string]health.ClusterHealth{"nomad/global": h}, rec, at, stableFor); !why.IsZero() {
		t.Fatalf("at its recheck the gate is still closed: %q", why)
	}
}

// TestPostGateSettles: a rejoining server host held by its post-reboot gate is
// decided again on the next pass with the same view of its clusters (a pass a
// moment later, after the first decision was stored). The second decision must
// change nothing: a hold reason that differs each pass on the same clusters
// rewrites the plan every pass, and the loop chains passes for ever (issue 42,
// part 3: "decisions kept changing with nothing else changing"). Seen with the
// reason of a server healthy but not stable long enough, which gave its time
// healthy so far, different at every pass.
func TestPostGateSettles(t *testing.T) {
	const stableFor = 10 * time.Second
	rejoined := t0.Add(-time.Second)
	server := func(mod func(*health.ServerHealth)) map[string]health.ClusterHealth {
		h := cluster(health.Nomad, "global", func(h *health.ClusterHealth) {
			for i := range h.Servers {
				h.Servers[i].StableSince = t0.Add(-time.Hour)
			}
			if mod != nil {
				mod(&h.Servers[0]) // s1: the rebooted host's server
			}
		})
		return map[string]health.ClusterHealth{"nomad/global": h}
	}
	tests := []struct {
		name     string
		clusters map[string]health.ClusterHealth
	}{
		{name: "healthy, not stable long enough", clusters: server(func(s *health.ServerHealth) { s.StableSince = rejoined })},
		{name: "healthy, stable time not reported", clusters: server(func(s *health.ServerHealth) { s.StableSince = time.Time{} })},
		{name: "not healthy yet", clusters: server(func(s *health.ServerHealth) { s.Healthy, s.StableSince = false, rejoined })},
		{name: "back as a non-voter", clusters: server(func(s *health.ServerHealth) { s.Voter, s.StableSince = false, rejoined })},
		{name: "not back in the Raft configuration", clusters: server(func(s *health.ServerHealth) { s.ID = "s9" })},
		{name: "cluster health unknown", clusters: map[string]health.ClusterHealth{
			"nomad/global": {Product: health.Nomad, Cluster: "global", Err: errors.New("500")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &store.HostRecord{Host: "srv1", BootID: "boot-2",
				Servers: []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}}}
			in := phase.Input{
				Now: t0, Host: rec, ServerGates: true, Clusters: tc.clusters,
				Timing: phase.Timing{RejoinTimeout: 10 * time.Minute},
				Plan: store.Plan{Host: "srv1", Group: "default", Phase: store.PhaseRejoining, PhaseSince: rejoined,
					GrantID: "g1", Attempt: 1, BootIDAtGrant: "boot-1",
					Timeline: map[string]time.Time{store.PhaseRejoining: rejoined}},
			}
			in.PostGate, in.PostGateRecheck = postGate(in.Clusters, rec, in.Now, stableFor)
			d := phase.Step(in)
			if d.Plan.Phase != store.PhaseRejoining || d.Waiting.Kind != phase.WaitPostRebootGate {
				t.Fatalf("first pass: phase %s, waiting %+v; want rejoining, held by the post-reboot gate", d.Plan.Phase, d.Waiting)
			}
			// Nothing watches the clusters' health: the decision asks for a
			// pass when the gate may open, at the latest a recheck later.
			if want := t0.Add(admission.ServerGateRecheck); !d.RecheckAt.Equal(want) {
				t.Errorf("recheck at %s, want %s", d.RecheckAt, want)
			}
			// The next pass: the plan as the first stored it, the same clusters,
			// a moment later (the gate still closed).
			for _, later := range []time.Duration{time.Millisecond, 300 * time.Millisecond, 5 * time.Second} {
				next := in
				next.Plan, next.Now = d.Plan, in.Now.Add(later)
				next.PostGate, next.PostGateRecheck = postGate(next.Clusters, rec, next.Now, stableFor)
				if d2 := phase.Step(next); d2.Changes() {
					t.Errorf("%s later, the same clusters: the decision changes something (write %v), waiting %q after %q",
						later, d2.Write, d2.Plan.Waiting, d.Plan.Waiting)
				}
			}
		})
	}
}

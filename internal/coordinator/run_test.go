package coordinator

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// One Nomad request that never gets an answer does not freeze the coordinator:
// the drain of one node hangs (accepted, never answered), and the coordinator
// still drains the other host's node, because the request has a deadline. The
// passes that waited on the hang overrun the resync interval and are counted.
func TestCoordinatorKeepsDecidingWhileARequestHangs(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 2, ClientPools: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	hc := &http.Client{Transport: &deadline.Transport{Timeout: 300 * time.Millisecond, Margin: 300 * time.Millisecond}}
	client, err := api.NewClient(&api.Config{Address: sim.Address(), HttpClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st := store.New(client.Variables(), "rollboot", "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	hung, _ := sim.Host("client-1")
	other, _ := sim.Host("client-2")
	for _, h := range []nomadsim.Host{hung, other} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/node/" + hung.NodeID + "/drain", ErrorRate: 1, Hang: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Requests = map[string]store.Request{hung.Name: {At: now}, other.Name: {At: now}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			Groups: []rules.GroupSpec{
				{Group: policy.Group{Name: "a", Concurrency: 1}, Filter: `NodePool == "a"`},
				{Group: policy.Group{Name: "b", Concurrency: 1}, Filter: `NodePool == "b"`},
			},
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Resync: 100 * time.Millisecond},
	})
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()

	// client-1 comes first in every pass, and its drain never gets an answer.
	err = sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		hang, drained := false, false
		for _, e := range v.Events() {
			hang = hang || (e.Type == nomadsim.EventFault && e.Details["hang"] == "true")
			drained = drained || (e.Type == nomadsim.EventDrainStart && e.NodeID == other.NodeID)
		}
		return hang && drained
	})
	if err != nil {
		t.Fatalf("the other host's node was not drained while a drain request hung: %v", err)
	}
	waitOverrun(t, ctx, co)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// waitOverrun waits until the coordinator counted an overrun, in Overruns and in
// its registry.
func waitOverrun(t *testing.T, ctx context.Context, co *Coordinator) {
	t.Helper()
	for {
		if o := co.Overruns(); o.Count > 0 {
			if o.Took <= 100*time.Millisecond || o.Last.IsZero() {
				t.Errorf("overrun %+v", o)
			}
			if got := counterValue(t, co, "rollboot_coordinator_pass_overruns_total"); got < 1 {
				t.Errorf("overrun counter = %v", got)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no pass overrun was counted")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func counterValue(t *testing.T, co *Coordinator, name string) float64 {
	t.Helper()
	mfs, err := co.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// A host rejoining after its reboot waits for its node's system jobs to run again.
// Nothing in the host records, the control variable or the node list changes when
// an allocation starts, so the coordinator watches the allocations of that node:
// the slot is freed as soon as the job runs, not at the next resync (30s here).
func TestRejoinSeesSystemJobsWithoutResync(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 1})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	h, _ := sim.Host("client-1")
	if _, err := st.PutHost(ctx, store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	plan := store.Plan{Host: h.Name, Phase: store.PhaseRejoining, PhaseSince: now, Group: "default",
		NodeID: h.NodeID, GrantID: "g1", BootIDAtGrant: "boot-before", EligibleBefore: true,
		SystemJobs: []string{"default/late"},
		Timeline:   map[string]time.Time{store.PhasePending: now, store.PhaseRejoining: now}}
	if _, err := st.PutPlan(ctx, plan); err != nil {
		t.Fatal(err)
	}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Resync: 30 * time.Second},
	})
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	waitPlan(t, ctx, st, h.Name, func(p store.Plan) bool { return p.Waiting == "waiting for system job default/late to run on the node" })

	start := time.Now()
	if err := sim.AddJob(nomadsim.JobSpec{ID: "late", Type: api.JobTypeSystem}); err != nil {
		t.Fatal(err)
	}
	waitPlan(t, ctx, st, h.Name, func(p store.Plan) bool { return p.Phase == store.PhaseIdle })
	took := time.Since(start)
	t.Logf("system job placed → slot freed: %s", took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the slot was freed %s after the system job ran: it waited for the resync", took)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// waitPlan waits until the host's plan satisfies cond.
func waitPlan(t *testing.T, ctx context.Context, st *store.Store, host string, cond func(store.Plan) bool) {
	t.Helper()
	var idx uint64
	for {
		p, n, err := st.WatchPlan(ctx, host, idx, time.Second)
		if err == nil && cond(p) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("plan of %s: %+v, %v", host, p, err)
		}
		idx = n
	}
}

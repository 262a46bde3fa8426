package coordinator

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// A host whose agent runs as a system job missing from its node is held
// (its drain would leave nobody to reboot it), and the slot it was offered goes
// to the next host in line in the same pass: with concurrency 1, a group held
// behind such a host would otherwise stall for as long as the job is missing.
func TestAgentLostGivesItsSlotToTheNextHost(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 2})
	ctx := t.Context()
	now := time.Now()
	for i, name := range []string{"client-1", "client-2"} {
		h, _ := sim.Host(name)
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient},
			RebootRequired: true, AgentJob: "default/rollboot"}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Duration(i) * time.Minute) // client-1 first in line
		if _, err := st.PutPlan(ctx, store.Plan{Host: h.Name, Phase: store.PhasePending, PhaseSince: at, RequestedAt: at,
			Group: "default", NodeID: h.NodeID, Timeline: map[string]time.Time{store.PhasePending: at}}); err != nil {
			t.Fatal(err)
		}
	}
	// The agent's system job runs on client-2 only.
	if err := sim.AddJob(nomadsim.JobSpec{ID: "rollboot", Type: api.JobTypeSystem}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetTaskRunning("client-1", "rollboot", false); err != nil {
		t.Fatal(err)
	}
	h2, _ := sim.Host("client-2")
	for running := false; !running; {
		allocs, _, err := client.Nodes().Allocations(h2.NodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			running = running || (a.JobID == "rollboot" && a.ClientStatus == api.AllocClientStatusRunning)
		}
		if ctx.Err() != nil {
			t.Fatal("the agent's job never ran on client-2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Resync: 30 * time.Second},
	})
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	p1, err := st.Plan(ctx, "client-1")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := st.Plan(ctx, "client-2")
	if err != nil {
		t.Fatal(err)
	}
	if p1.Phase != store.PhasePending || p1.Waiting != phase.WaitFor(phase.WaitAgentNotOnNode, "default/rollboot").String() {
		t.Errorf("client-1: phase %s waiting %q, want pending and held for its agent", p1.Phase, p1.Waiting)
	}
	if p2.Phase != store.PhaseDraining {
		t.Errorf("client-2: phase %s waiting %q, want draining in the same pass", p2.Phase, p2.Waiting)
	}
}

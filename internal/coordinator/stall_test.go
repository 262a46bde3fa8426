package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// No request can stall a rollout, even through a client with no deadline of its
// own (api.NewClient's default http.Client waits for ever). The first read of a
// host record (in observe) and the first drain of a node are accepted and never
// answered; each step ends at StepTimeout, the pass is retried, and both hosts
// are drained: the rollout goes on.
func TestHungRequestIsAbandonedAndThePassRetried(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 2, ClientPools: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	client, err := api.NewClient(&api.Config{Address: sim.Address()}) // no deadline
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st := store.New(client.Variables(), "rollboot", "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	h1, _ := sim.Host("client-1")
	h2, _ := sim.Host("client-2")
	now := time.Now()
	for _, h := range []nomadsim.Host{h1, h2} {
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient},
			RebootRequired: true, Reason: "kernel", RequestedAt: now}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []nomadsim.Fault{
		{PathPrefix: "/v1/var/rollboot/hosts/" + h1.Name, Method: "GET", ErrorRate: 1, Hang: true, Count: 1},
		{PathPrefix: "/v1/node/" + h1.NodeID + "/drain", ErrorRate: 1, Hang: true, Count: 1},
	} {
		if err := sim.InjectFault(f); err != nil {
			t.Fatal(err)
		}
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
		Runtime: Runtime{Resync: time.Hour, StepTimeout: 500 * time.Millisecond},
	})
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()

	err = sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		hangs, drained := 0, map[string]bool{}
		for _, e := range v.Events() {
			if e.Type == nomadsim.EventFault && e.Details["hang"] == "true" {
				hangs++
			}
			if e.Type == nomadsim.EventDrainStart {
				drained[e.NodeID] = true
			}
		}
		return hangs == 2 && drained[h1.NodeID] && drained[h2.NodeID]
	})
	if err != nil {
		t.Fatalf("the rollout did not go on after two hung requests: %v", err)
	}
	if got := counterValue(t, co, "rollboot_coordinator_step_timeouts_total"); got < 2 {
		t.Errorf("step timeouts counted: %v, want at least 2", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
)

// Room freed by an allocation ending on another node changes nothing in the
// node list, so only the capacity recheck can release the hold before the
// resync (10 minutes here): the host is drained within admission.CapacityRecheck of the
// batch job that filled the other node completing.
func TestCapacityHoldReleasedByRecheck(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 2})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, h := range []string{"client-1", "client-2"} {
		if err := sim.SetNodeResources(h, nomadsim.NodeResources{CPU: 4000, MemoryMB: 8000}); err != nil {
			t.Fatal(err)
		}
	}
	// The batch job fills one node; the service allocation must go to the
	// other, and can move back only once the batch job is done.
	if err := sim.AddJob(nomadsim.JobSpec{ID: "filler", Type: api.JobTypeBatch, RunTime: 4 * time.Second,
		Groups: []nomadsim.GroupSpec{{Name: "f", CPU: 100, MemoryMB: 6000}}}); err != nil {
		t.Fatal(err)
	}
	if err := sim.AddJob(nomadsim.JobSpec{ID: "web", Groups: []nomadsim.GroupSpec{{Name: "web", CPU: 100, MemoryMB: 4096}}}); err != nil {
		t.Fatal(err)
	}
	var webHost string
	if err := sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		for _, name := range []string{"client-1", "client-2"} {
			h, _ := v.Host(name)
			if _, ok := v.RunningAlloc(h.NodeID, "web"); ok {
				webHost = name
			}
		}
		return webHost != ""
	}); err != nil {
		t.Fatal(err)
	}
	h, _ := sim.Host(webHost)
	requestReboot(ctx, t, st, h)
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 1},
			Timing:       phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
			Capacity:     rules.CapacityGate{Enabled: true},
		},
		Runtime: Runtime{Resync: 10 * time.Minute},
	})
	held := false
	finished, drained := runUntilDrained(ctx, t, sim, co, "filler", func() {
		for !held && ctx.Err() == nil {
			plans, err := st.Plans(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			for _, p := range plans {
				held = held || p.Host == h.Name && strings.HasPrefix(p.Waiting, "capacity: ")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	if !held {
		t.Fatal("the host was never held by the capacity gate")
	}
	drainedWithinRecheck(t, finished, drained, admission.CapacityRecheck, "the batch job filling the other node")
}

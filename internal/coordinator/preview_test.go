package coordinator

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// Preview says what the next pass decides, and writes nothing: three hosts of a
// group of concurrency 1 need a reboot and no coordinator has seen them yet; the
// preview has the first starting and the others waiting, the emulator's index
// does not move, and the pass that follows does just that, with the same reasons.
func TestPreviewAgreesWithThePassAndWritesNothing(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 3})
	ctx := t.Context()
	asked := time.Now().Add(-time.Hour)
	for i, name := range []string{"client-3", "client-1", "client-2"} { // asked in this order
		h, _ := sim.Host(name)
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient},
			RebootRequired: true, Reason: "test", RequestedAt: asked.Add(time.Duration(i) * time.Minute)}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			Groups: []rules.GroupSpec{{Group: policy.Group{Name: "all", Concurrency: 1}}},
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
	})

	index := sim.Index()
	res, err := co.Preview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sim.Index(); got != index {
		t.Errorf("Preview wrote: the index moved from %d to %d", index, got)
	}
	if plans, err := st.Plans(ctx); err != nil || len(plans) != 0 {
		t.Errorf("plans after Preview: %v, %v; want none", plans, err)
	}
	want := map[string]bool{"client-3": true, "client-1": false, "client-2": false}
	reasons := map[string]string{}
	for _, h := range res.Hosts {
		if h.Starts != want[h.Host] || h.Group != "all" || h.Plan.Phase != store.PhasePending {
			t.Errorf("preview of %s: %+v", h.Host, h)
		}
		if !h.Starts && h.Waiting.Kind != phase.WaitQueued {
			t.Errorf("%s waits for %v, want a slot of its group", h.Host, h.Waiting)
		}
		reasons[h.Host] = h.Waiting.Stored() // a queued host's reason is computed, not stored
	}
	if len(res.Hosts) != 3 || len(res.Groups) != 2 || res.Groups[1].Slots != 1 {
		t.Fatalf("preview: %+v", res)
	}

	// The pass: it sees the needs (idle to pending, stored) and grants the
	// slots free in the same pass (regrant.go).
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, starts := range want {
		p := plans[name]
		if starts != (p.Phase == store.PhaseDraining) || (!starts && p.Waiting != reasons[name]) {
			t.Errorf("%s after the pass: phase %s, waiting %q; the preview said starts=%v, %q", name, p.Phase, p.Waiting, starts, reasons[name])
		}
	}
}

// A host that runs servers is previewed with their clusters, which the
// estimate serializes across groups (package preview).
func TestPreviewNamesAServersClusters(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 2})
	ctx := t.Context()
	for i, name := range []string{"client-1", "client-2"} {
		h, _ := sim.Host(name)
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient},
			RebootRequired: true, Reason: "test", RequestedAt: time.Now().Add(time.Duration(i-10) * time.Minute)}
		if name == "client-1" {
			rec.Roles = append(rec.Roles, store.RoleNomadServer, store.RoleConsulServer)
			rec.Servers = []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}, {Product: "consul", Cluster: "dc1", ID: "c1"}}
		}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st},
		Rules: rules.Rules{
			Groups: []rules.GroupSpec{{Group: policy.Group{Name: "all", Concurrency: 1}}},
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
	})
	res, err := co.Preview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, h := range res.Hosts {
		got[h.Host] = h.Clusters
	}
	if c := got["client-1"]; len(c) != 2 || c[0] != "nomad/global" || c[1] != "consul/dc1" {
		t.Errorf("clusters of client-1, which runs a Nomad and a Consul server: %q", c)
	}
	if c, ok := got["client-2"]; !ok || len(c) != 0 {
		t.Errorf("clusters of client-2, a client only: %q (previewed: %t)", c, ok)
	}
}

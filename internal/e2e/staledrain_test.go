package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// A drain of rollboot's that no cycle holds, as a coordinator stopped between
// its lease check and its drain call sends it after its successor ended the
// grant: the leader gives the node back at once (the node watch wakes it, with
// the production resync) when the drain's meta says it was eligible before. The
// nodes run only system jobs, so the drains complete at once, leaving them
// ineligible, as Nomad does. One whose node was ineligible before stays
// ineligible; a drain by someone else is left alone.
func TestStaleDrainIsCanceled(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync})
	c.start()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 3 })
	drain := func(host string, meta map[string]string) {
		t.Helper()
		spec := &api.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: true}
		if _, err := c.client.Nodes().UpdateDrainOpts(c.nodeOf(host), &api.DrainOptions{DrainSpec: spec, Meta: meta}, nil); err != nil {
			t.Fatal(err)
		}
	}
	state := func(host string) (draining, eligible bool) {
		n, err := c.sim.Node(host)
		if err != nil {
			t.Fatal(err)
		}
		return n.DrainStrategy != nil, n.SchedulingEligibility == api.NodeSchedulingEligible
	}
	// client-2 was ineligible before the late drain (an operator's choice).
	if _, err := c.client.Nodes().ToggleEligibility(c.nodeOf("client-2"), false, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	drain("client-1", map[string]string{"rollboot_grant": "g-late", "rollboot_eligible_before": "true", "drained_by": "rollboot"})
	drain("client-2", map[string]string{"rollboot_grant": "g-late-2", "rollboot_eligible_before": "false", "drained_by": "rollboot"})
	drain("client-3", map[string]string{"drained_by": "an operator"})
	defer func() {
		for _, h := range []string{"client-1", "client-2", "client-3"} {
			d, e := state(h)
			t.Logf("%s: draining %v eligible %v", h, d, e)
		}
	}()
	c.within("client-1 given back", start, func() bool {
		d1, e1 := state("client-1")
		return !d1 && e1
	})
	// Later passes leave the others as they are.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.sim.WaitFor(ctx, func(v *nomadsim.View) bool { return false })
	if _, e3 := state("client-3"); e3 {
		t.Error("a node drained by an operator was made eligible")
	}
	if _, e2 := state("client-2"); e2 {
		t.Error("client-2 made eligible, though it was not before the drain")
	}
}

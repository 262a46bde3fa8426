package e2e

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// With the production resync interval (30s), the coordinator reacts to what it
// is waiting for at once, though Nomad wakes a blocking query only for its own
// data and never for the coordinator's own writes. It prints two latencies:
//
//   - request → drain start: a manual request for a host whose group has a free
//     slot, until the drain of its node starts (the coordinator's passes: control
//     change → pending → draining);
//   - rebooted → eligible: the node registering again after the reboot, until the
//     coordinator makes it eligible again (node change → rejoining → eligible);
//   - and, for information, rebooted → slot freed: until the node's system jobs
//     (the agent and another one) run again and the agent reported its new boot.
//
// Run: go test -count=1 -v -run TestReactionLatency ./internal/e2e/
func TestReactionLatency(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync, policy: `group "all" {
  concurrency = 1
}`, jobs: []nomadsim.JobSpec{{ID: "node-exporter", Type: "system"}}})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 3 })
	h := hosts[1]
	node, _ := c.sim.Host(h)

	start := time.Now()
	c.cli("request", h, "--reason", "latency")
	c.within("request → drain start (free slot)", start, func() bool { return c.drainStarted(h) })
	c.waitFor("the host to reboot and rejoin", 2*productionResync, c.rebootedAll([]string{h}))

	var ready, boot, eligible time.Time
	for _, e := range c.sim.Events(0) {
		if e.NodeID != node.NodeID && e.Host != h {
			continue
		}
		switch {
		case e.Type == nomadsim.EventHostBoot:
			boot = e.Time
		case e.Type == nomadsim.EventNodeReady && !boot.IsZero():
			ready = e.Time
		case e.Type == nomadsim.EventEligibility && !ready.IsZero() && e.Details["eligibility"] == api.NodeSchedulingEligible:
			eligible = e.Time
		}
	}
	if ready.IsZero() || eligible.IsZero() {
		t.Fatalf("no node.ready (%v) or node.eligibility eligible (%v) after the boot", ready, eligible)
	}
	took := eligible.Sub(ready)
	t.Logf("rebooted → eligible (node ready again → eligible): %s (host boot → eligible: %s)",
		took.Round(time.Millisecond), eligible.Sub(boot).Round(time.Millisecond))
	if took > productionResync/2 {
		t.Errorf("rebooted → eligible took %s with resync_interval %s: it waited for a resync", took, productionResync)
	}
	for _, r := range c.history() {
		if r.Host == h && r.Outcome == "rebooted" {
			freed := r.Finished.Sub(ready)
			t.Logf("rebooted → slot freed (node ready again → history written): %s", freed.Round(time.Millisecond))
			if freed > productionResync/2 {
				t.Errorf("rebooted → slot freed took %s with resync_interval %s: it waited for a resync", freed, productionResync)
			}
		}
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 0, h: 1, hosts[2]: 0}})
}

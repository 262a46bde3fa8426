package e2e

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// A rollout that drains three nodes of a group at once, with two service jobs
// spread over every node: the hosts' drains overlap, and at no moment are more
// allocations of a task group down (marked for migration, stopping or stopped, and
// not yet replaced by one whose health is set) than the group's migrate
// max_parallel, as Nomad's drainer (1.10.3 and later) enforces across all draining
// nodes. Invariant 6 of the checker replays this from the emulator's event log.
func TestConcurrentDrainsRespectMaxParallel(t *testing.T) {
	t.Parallel()
	jobs := []nomadsim.JobSpec{
		{ID: "web", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "front", Count: 6, MigrateMaxParallel: 1}}},
		{ID: "api", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 6, MigrateMaxParallel: 2}}},
	}
	c := newCluster(t, clusterOpts{clients: 6, policy: `
drain {
  deadline = "60s"
  on_timeout = "abort"
  retry_backoff = "500ms"
}
group "all" {
  concurrency = 3
}`, jobs: jobs})
	hosts := c.clients()
	// Every allocation is placed and healthy before the rollout starts.
	waitHealthy := func() bool {
		n := 0
		for _, h := range hosts {
			as, _, err := c.client.Nodes().Allocations(nodeIDOf(t, c, h), nil)
			if err != nil {
				return false
			}
			for _, a := range as {
				if a.JobID != agentJob && a.DesiredStatus == "run" && a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil {
					n++
				}
			}
		}
		return n == 12
	}
	c.waitFor("every allocation healthy", 30*time.Second, waitHealthy)
	c.start()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))

	group := map[string]string{}
	for _, h := range hosts {
		group[h] = "all"
	}
	res := c.mustHold(invariants.Spec{Group: group, Concurrency: map[string]int{"all": 3},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1), Jobs: c.sim.Jobs()})

	// The test means something only if drains really overlapped and moved work.
	draining, most := map[string]bool{}, 0
	for _, e := range c.sim.Events(0) {
		switch e.Type {
		case nomadsim.EventDrainStart:
			draining[e.Host] = true
		case nomadsim.EventDrainComplete, nomadsim.EventDrainCancel:
			delete(draining, e.Host)
		}
		most = max(most, len(draining))
	}
	if most < 2 {
		t.Errorf("at most %d nodes drained at once; the test needs concurrent drains", most)
	}
	if res.MigratePeak["web.front"] != 1 || res.MigratePeak["api.api"] < 1 {
		t.Errorf("allocations down at once: %v; want web.front 1 and api.api 1 or 2", res.MigratePeak)
	}
	t.Logf("nodes draining at once: %d; allocations down at once per group: %v", most, res.MigratePeak)
}

func nodeIDOf(t *testing.T, c *cluster, host string) string {
	t.Helper()
	h, ok := c.sim.Host(host)
	if !ok || h.NodeID == "" {
		t.Fatalf("host %s has no node", host)
	}
	return h.NodeID
}

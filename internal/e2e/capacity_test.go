package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The capacity gate (on by default): a pool too full to take a node's
// allocations holds its drain, with the reason in `rollboot status` and
// `rollboot plan`; a node added to the pool (scale out) releases it at once,
// woken by the node list watch with the production resync, and the rollout
// completes.
func TestCapacityHoldsUntilScaleOut(t *testing.T) {
	t.Parallel()
	c, hosts, held := fullPool(t)
	if out := c.cli("status"); !strings.Contains(out, fullPoolReason) {
		t.Errorf("rollboot status lacks %q:\n%s", fullPoolReason, out)
	}
	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	if out := c.cli("plan", "--config", cfg); !strings.Contains(out, fullPoolReason) {
		t.Errorf("rollboot plan lacks %q:\n%s", fullPoolReason, out)
	}
	for _, h := range hosts {
		if c.drainStarted(h) {
			t.Fatalf("%s drained though its allocation has nowhere to go", h)
		}
	}

	// Scale out: a third node in the pool. Only the node list watch can wake the
	// coordinator in time (the resync is 30s).
	start := time.Now()
	if _, err := c.sim.AddHost("client-3", false, true, "batch"); err != nil {
		t.Fatal(err)
	}
	c.within("scale out → drain start", start, func() bool { return c.drainStarted(held) })
	c.waitFor("both hosts rebooted", 90*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

// The capacity block is policy: turned off by `rollboot policy apply`, the held
// host's drain starts at once (the coordinator watches the stored policy).
func TestCapacityOffByPolicy(t *testing.T) {
	t.Parallel()
	c, _, held := fullPool(t)
	start := time.Now()
	c.applyPolicy(c.policySource() + "\ncapacity {\n  enabled = false\n}\n")
	c.within("capacity off → drain start", start, func() bool { return c.drainStarted(held) })
}

const fullPoolReason = "capacity: pool batch: needs 6 GiB memory, 1.4 GiB free"

// fullPool starts two hosts in pool batch, both needing a reboot, whose pool
// cannot take either's allocation, and waits for the first in line to be held
// by the capacity gate (returned).
func fullPool(t *testing.T) (*cluster, []string, string) {
	t.Helper()
	// Two nodes of 7900 MB, each with one 6 GiB allocation and the agent's (300
	// MB, Nomad's default): neither can take the other's.
	c := newCluster(t, clusterOpts{clients: 2, pools: []string{"batch"}, resync: productionResync, policy: `group "all" {
  concurrency = 1
}`, jobs: []nomadsim.JobSpec{{ID: "etl", Type: "service", NodePool: "batch",
		Groups: []nomadsim.GroupSpec{{Name: "etl", Count: 2, CPU: 500, MemoryMB: 6144}}}}})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.needReboot(hosts...)
	var held string
	c.waitFor("the first host held by the capacity gate", 30*time.Second, func() bool {
		for _, h := range c.status().Hosts {
			if h.Phase == store.PhasePending && h.Waiting == fullPoolReason {
				held = h.Host
				return true
			}
		}
		return false
	})
	return c, hosts, held
}

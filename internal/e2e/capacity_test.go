package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

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

// The gate places what a drain moves only on nodes meeting the job's
// constraints: the other node of the pool has room but is in rack r2, which the
// job excludes, so the host is held with a reason naming the constraint in
// `rollboot status` and `rollboot plan`. Moving that node to another rack
// (dynamic node metadata, through Nomad's API) releases it at once, woken by the
// node list watch with the production resync, and the job's allocation moves
// there.
func TestCapacityHoldsOnConstraints(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, pools: []string{"batch"}, resync: productionResync, policy: `group "all" {
  concurrency = 1
}`})
	for h, rack := range map[string]string{"client-1": "r1", "client-2": "r2"} {
		if err := c.sim.SetNodeMeta(h, map[string]string{"rack": rack}); err != nil {
			t.Fatal(err)
		}
	}
	// One small allocation, which only client-1 may take.
	if err := c.sim.AddJob(nomadsim.JobSpec{ID: "etl", NodePool: "batch", Groups: []nomadsim.GroupSpec{{Name: "etl", CPU: 500, MemoryMB: 1024,
		Constraints: []nomadsim.ConstraintSpec{{Attribute: "${meta.rack}", Operator: "!=", Value: "r2"}}}}}); err != nil {
		t.Fatal(err)
	}
	c.start()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	etlOn := func(host string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
			h, _ := v.Host(host)
			_, ok := v.RunningAlloc(h.NodeID, "etl")
			return ok
		}); err != nil {
			t.Fatalf("etl not running on %s: %v", host, err)
		}
	}
	etlOn("client-1")
	c.needReboot("client-1")
	const reason = `capacity: pool batch: no eligible node satisfies the constraints of job etl (1 allocation): "${meta.rack} != r2" excluded 1 node`
	c.waitPendingFor("client-1", reason)
	if out := c.cli("status"); !strings.Contains(out, reason) {
		t.Errorf("rollboot status lacks %q:\n%s", reason, out)
	}
	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	if out := c.cli("plan", "--config", cfg); !strings.Contains(out, reason) {
		t.Errorf("rollboot plan lacks %q:\n%s", reason, out)
	}
	if c.drainStarted("client-1") {
		t.Fatal("client-1 drained though its allocation may go nowhere")
	}

	// client-2 moves to rack r3, as `nomad node meta apply` does it.
	n2, err := c.sim.Node("client-2")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r3 := "r3"
	if _, err := c.client.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: n2.ID, Meta: map[string]*string{"rack": &r3}}, nil); err != nil {
		t.Fatal(err)
	}
	c.within("node meta changed → drain start", start, func() bool { return c.drainStarted("client-1") })
	c.waitFor("client-1 rebooted", 90*time.Second, c.rebootedAll([]string{"client-1"}))
	etlOn("client-2")
	c.mustHold(invariants.Spec{EligibleBefore: allTrue([]string{"client-1"}), Reboots: each([]string{"client-1"}, 1)})
}

// The gate honours distinct_hosts as the scheduler does: the other node of the
// pool has room but already runs an allocation of the group, which asks for
// distinct hosts, so the host is held with a reason naming distinct_hosts. A
// node added to the pool releases it (woken by the node watch, production
// resync), and the allocation moves there.
func TestCapacityHoldsOnDistinctHosts(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, pools: []string{"batch"}, resync: productionResync, policy: `group "all" {
  concurrency = 1
}`, jobs: []nomadsim.JobSpec{{ID: "web", NodePool: "batch", Groups: []nomadsim.GroupSpec{{Name: "web", Count: 2, CPU: 500, MemoryMB: 512,
		Constraints: []nomadsim.ConstraintSpec{{Operator: "distinct_hosts", Value: "true"}}}}}}})
	c.start()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	webOn := func(hosts ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
			for _, host := range hosts {
				h, _ := v.Host(host)
				if _, ok := v.RunningAlloc(h.NodeID, "web"); !ok {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatalf("web not running on each of %v: %v", hosts, err)
		}
	}
	webOn("client-1", "client-2")
	c.needReboot("client-1")
	const reason = `capacity: pool batch: no eligible node satisfies the constraints of job web (1 allocation): "distinct_hosts" excluded 1 node`
	c.waitPendingFor("client-1", reason)
	if out := c.cli("status"); !strings.Contains(out, reason) {
		t.Errorf("rollboot status lacks %q:\n%s", reason, out)
	}
	if c.drainStarted("client-1") {
		t.Fatal("client-1 drained though its allocation may go nowhere")
	}
	start := time.Now()
	if _, err := c.sim.AddHost("client-3", false, true, "batch"); err != nil {
		t.Fatal(err)
	}
	c.within("scale out → drain start", start, func() bool { return c.drainStarted("client-1") })
	c.waitFor("client-1 rebooted", 90*time.Second, c.rebootedAll([]string{"client-1"}))
	webOn("client-2", "client-3")
	c.mustHold(invariants.Spec{EligibleBefore: allTrue([]string{"client-1"}), Reboots: each([]string{"client-1"}, 1)})
}

// waitPendingFor waits until host is pending with reason as its wait.
func (c *cluster) waitPendingFor(host, reason string) {
	c.t.Helper()
	c.waitFor(host+" held: "+reason, 30*time.Second, func() bool {
		for _, h := range c.status().Hosts {
			if h.Host == host && h.Phase == store.PhasePending && h.Waiting == reason {
				return true
			}
		}
		return false
	})
}

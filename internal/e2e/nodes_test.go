package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// nodesTTL is Nomad's MinHeartbeatTTL (10s) scaled down 100 times.
const nodesTTL = 100 * time.Millisecond

// realHeartbeats sets a minimum heartbeat TTL with Nomad's ratios (HeartbeatGrace
// 10s = the TTL, FailoverHeartbeatTTL 5m = 30 TTLs) and a boot time.
func realHeartbeats(ttl, boot time.Duration) func(*nomadsim.Config) {
	return func(cfg *nomadsim.Config) {
		cfg.HeartbeatTTL, cfg.HeartbeatGrace, cfg.FailoverHeartbeatTTL = ttl, ttl, 30*ttl
		cfg.BootTime = boot
	}
}

// nodePath returns the node status changes of host, in order, from the
// emulator's event log.
func (c *cluster) nodePath(host string) []string {
	var out []string
	for _, e := range c.sim.Events(0) {
		if e.Host != host {
			continue
		}
		switch e.Type {
		case nomadsim.EventNodeDown, nomadsim.EventNodeDisconnected, nomadsim.EventNodeInit, nomadsim.EventNodeReady:
			out = append(out, e.Type)
		}
	}
	return out
}

// rollOut reboots every client host one at a time and checks what every test here
// wants: each host rebooted exactly once, its node eligible again, and the
// invariant checker clean.
func (c *cluster) rollOut(t *testing.T) []string {
	t.Helper()
	c.start()
	hosts := c.clients()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: each3(hosts, "all"), Concurrency: map[string]int{"all": 1},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	for _, h := range hosts {
		n, err := c.sim.Node(h)
		if err != nil {
			t.Fatal(err)
		}
		if n.SchedulingEligibility != api.NodeSchedulingEligible || n.Status != api.NodeStatusReady || n.DrainStrategy != nil {
			t.Errorf("%s: node %s, %s, draining %v after its reboot", h, n.Status, n.SchedulingEligibility, n.DrainStrategy != nil)
		}
	}
	for _, r := range c.history() {
		if r.Outcome != "rebooted" || r.BootIDBefore == r.BootIDAfter {
			t.Errorf("%s: history %s, boot ID %s -> %s", r.Host, r.Outcome, r.BootIDBefore, r.BootIDAfter)
		}
	}
	return hosts
}

func each3(hosts []string, group string) map[string]string {
	m := map[string]string{}
	for _, h := range hosts {
		m[h] = group
	}
	return m
}

const oneGroup = `
group "all" {
  concurrency = 1
}
drain {
  deadline = "20s"
}
`

// The agents' system job has a disconnect block, so a rebooting node that misses
// its heartbeats goes disconnected, not down, and comes back through initializing
// with no "re-registered" event. rollboot still sees every reboot.
func TestRebootSeenThroughDisconnected(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, policy: oneGroup, resync: productionResync, agentLostAfter: time.Hour,
		simConfig: realHeartbeats(nodesTTL, 8*nodesTTL), jobs: standardJobs[2:]})
	for _, h := range c.rollOut(t) {
		path := c.nodePath(h)
		want := []string{nomadsim.EventNodeDisconnected, nomadsim.EventNodeInit, nomadsim.EventNodeReady}
		if !slices.Equal(path, want) {
			t.Errorf("%s: node went %v; want %v", h, path, want)
		}
		// The agent's allocation was unknown while the node was away and
		// reconnected: the same allocation, never lost.
		var agentAlloc []string
		for _, e := range c.sim.Events(0) {
			if e.Host == h && e.Details["job"] == agentJob &&
				(e.Type == nomadsim.EventAllocUnknown || e.Type == nomadsim.EventAllocStart || e.Type == nomadsim.EventAllocStop) {
				agentAlloc = append(agentAlloc, e.Type+" "+e.Details["reason"])
			}
		}
		wantAlloc := []string{nomadsim.EventAllocStart + " ", nomadsim.EventAllocUnknown + " node disconnected", nomadsim.EventAllocStart + " reconnected"}
		if !slices.Equal(agentAlloc, wantAlloc) {
			t.Errorf("%s: agent allocation went %q; want %q", h, agentAlloc, wantAlloc)
		}
	}
}

// A reboot shorter than the heartbeat TTL: the node never misses a heartbeat and
// stays ready, the agent's allocation stays (the client restarts it at boot), and
// the only sign of the reboot is the agent's new boot ID.
func TestRebootWithoutMissedHeartbeat(t *testing.T) {
	t.Parallel()
	ttl := 5 * nodesTTL // the earliest a silent node can be marked is one grace (= TTL) after its last heartbeat
	c := newCluster(t, clusterOpts{clients: 3, policy: oneGroup, resync: productionResync, simConfig: realHeartbeats(ttl, ttl/5), jobs: standardJobs[2:]})
	for _, h := range c.rollOut(t) {
		if path := c.nodePath(h); len(path) != 0 {
			t.Errorf("%s: node went %v during a reboot shorter than the heartbeat TTL", h, path)
		}
	}
}

// The agents' system job has no disconnect block: a rebooting node goes down, its
// agent's allocation is lost and not placed again while the node is ineligible,
// and the node comes back with "Node reregistered by heartbeat" (Nomad ≥ 1.5
// adds no "Node re-registered" here). rollboot learns of the reboot from the node.
func TestRebootSeenThroughDown(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, policy: oneGroup, resync: productionResync,
		simConfig: realHeartbeats(nodesTTL, 8*nodesTTL), jobs: standardJobs[2:]})
	for _, h := range c.rollOut(t) {
		path := c.nodePath(h)
		if !slices.Equal(path, []string{nomadsim.EventNodeDown, nomadsim.EventNodeReady}) {
			t.Errorf("%s: node went %v; want down then ready", h, path)
		}
	}
}

// The Nomad leader changes while each host goes down for its reboot (as when a
// server host's leadership was handed over right before): the new leader gives
// the silent node the failover TTL, so a reboot longer than the normal TTL but
// shorter than the failover TTL misses no heartbeat, and only the agent's new boot
// ID tells.
func TestRebootRightAfterLeaderChange(t *testing.T) {
	t.Parallel()
	ttl := 3 * nodesTTL // the leader change must land within one grace (= TTL) of the host going down
	c := newCluster(t, clusterOpts{clients: 3, policy: oneGroup, resync: productionResync, simConfig: realHeartbeats(ttl, 4*ttl), jobs: standardJobs[2:]})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	changes := 0
	go func() {
		defer close(done)
		seen := 0
		for {
			err := c.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
				n := 0
				for _, e := range v.Events() {
					if e.Type == nomadsim.EventHostRebootStart {
						n++
					}
				}
				if n > seen {
					seen = n
					return true
				}
				return false
			})
			if err != nil {
				return
			}
			if c.sim.SetLeaderLost(true) == nil && c.sim.SetLeaderLost(false) == nil {
				changes++
			}
		}
	}()
	hosts := c.rollOut(t)
	cancel()
	<-done
	if changes != len(hosts) {
		t.Errorf("%d leader changes for %d reboots", changes, len(hosts))
	}
	for _, h := range hosts {
		if path := c.nodePath(h); len(path) != 0 {
			t.Errorf("%s: node went %v within the failover TTL", h, path)
		}
	}
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// unhealthyWeb is a system job whose health checks fail: every allocation its
// client starts is marked unhealthy at the healthy deadline (1s here).
var unhealthyWeb = nomadsim.JobSpec{ID: "web", Type: "system", Groups: []nomadsim.GroupSpec{{Name: "web", FailHealthChecks: true}}}

func healthyDeadline(d time.Duration) func(*nomadsim.Config) {
	return func(c *nomadsim.Config) { c.HealthyDeadline = d }
}

// waitingOf is the reason `rollboot status` gives for host.
func (c *cluster) waitingOf(host string) string {
	for _, h := range c.status().Hosts {
		if h.Host == host {
			return h.Waiting + " " + h.LastError
		}
	}
	return ""
}

// A rebooted host whose allocations come back unhealthy keeps its slot, with the
// reason in `rollboot status` (and `rollboot plan`), so the next host waits; the
// job fixed (its unhealthy allocations replaced by healthy ones), the host is
// released at once: the node's allocation watch wakes the coordinator, with the
// production resync of 30s.
func TestRejoinUnhealthyAllocationsHoldTheSlot(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, resync: productionResync, simConfig: healthyDeadline(time.Second),
		jobs: []nomadsim.JobSpec{unhealthyWeb},
		policy: `healthy {
  deadline = "10m"
}`})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.needReboot(hosts...)

	var first, second string
	c.waitFor("a host held by its unhealthy allocation", time.Minute, func() bool {
		for _, h := range hosts {
			if strings.Contains(c.waitingOf(h), "waiting for allocations to be healthy: web.web[0] unhealthy") {
				first = h
			}
		}
		return first != ""
	})
	for _, h := range hosts {
		if h != first {
			second = h
		}
	}
	if p := c.plans()[first]; p.Phase != store.PhaseRejoining {
		t.Fatalf("held host %s in phase %s", first, p.Phase)
	}
	// The slot stays taken: the other host does not start while the first is held.
	time.Sleep(2 * time.Second)
	if c.drainStarted(second) {
		t.Fatalf("%s was drained while %s held the only slot", second, first)
	}
	if plan := c.cli("plan", "--config", c.writeConfig("plan", c.configFor("", c.sim.Address()))); !strings.Contains(plan, "web.web[0] unhealthy") {
		t.Errorf("rollboot plan does not name the unhealthy allocation:\n%s", plan)
	}

	start := time.Now()
	if err := c.sim.ReplaceUnhealthy("", "web"); err != nil {
		t.Fatal(err)
	}
	c.within("allocations healthy → slot freed", start, func() bool { return c.plans()[first].Phase == store.PhaseIdle })
	c.waitFor("both hosts rebooted", 2*time.Minute, c.rebootedAll(hosts))
}

// With on_deadline = "release", a host whose allocations are still unhealthy at
// the healthy deadline gets its slot freed then (a timer wakes the pass, not the
// resync), with the alert in the coordinator's log.
func TestRejoinUnhealthyReleasedAtDeadline(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, resync: productionResync, simConfig: healthyDeadline(time.Second),
		jobs: []nomadsim.JobSpec{unhealthyWeb},
		policy: `group "all" {
  healthy {
    deadline    = "4s"
    on_deadline = "release"
  }
}`})
	c.start()
	h := c.clients()[0]
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.needReboot(h)
	c.waitFor("the host held by its unhealthy allocation", time.Minute, func() bool {
		return strings.Contains(c.waitingOf(h), "web.web[0] unhealthy")
	})
	rejoined := c.plans()[h].Timeline[store.PhaseRejoining]
	c.waitFor("the slot freed at the deadline", time.Minute, c.rebootedAll([]string{h}))
	var done time.Time
	for _, r := range c.history() {
		if r.Host == h {
			done = r.Finished
			if want := "slot freed at the healthy deadline with workloads unhealthy: web.web[0] unhealthy"; r.Outcome != "rebooted" || r.Error != want {
				t.Errorf("history: outcome %q, error %q; want rebooted, %q", r.Outcome, r.Error, want)
			}
		}
	}
	if p := c.plans()[h]; p.LastUnhealthy != "web.web[0] unhealthy" {
		t.Errorf("plan's last unhealthy %q: its back_in_service would not tell", p.LastUnhealthy)
	}
	after := done.Sub(rejoined)
	t.Logf("rejoining → slot freed: %s (deadline 4s)", after.Round(time.Millisecond))
	if after < 4*time.Second || after > 4*time.Second+productionResync/2 {
		t.Errorf("slot freed %s after the host came back, want at the 4s deadline", after)
	}
	// The coordinator logs the release after it stores the history record:
	// wait for the line rather than read the log at once.
	logged := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		var logs strings.Builder
		for _, b := range c.logs {
			logs.WriteString(b.String())
		}
		return strings.Contains(logs.String(), "slot freed with unhealthy workloads") && strings.Contains(logs.String(), "unhealthy=\"web.web[0] unhealthy\"")
	}
	c.waitFor("the release alert in the coordinator's log", 10*time.Second, logged)
}

// A group's drain block: its deadline goes to Nomad's drain (on_timeout =
// "force"), the system jobs are left running, and the allocations of its
// stop_jobs are stopped with Nomad's alloc stop rather than migrated.
func TestGroupDrainOptions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2,
		jobs: []nomadsim.JobSpec{{ID: "cache", Groups: []nomadsim.GroupSpec{{Name: "cache", Count: 2}}},
			{ID: "api", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 2}}}},
		policy: `drain {
  on_timeout = "force"
}
group "batch" {
  drain {
    deadline  = "2h"
    stop_jobs = ["cache"]
  }
}`})
	c.start()
	h := c.clients()[0]
	node, _ := c.sim.Host(h)
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.needReboot(h)
	c.waitFor("the host rebooted", 2*time.Minute, c.rebootedAll([]string{h}))
	var drain map[string]string
	stopped, migrated := map[string]bool{}, map[string]bool{}
	for _, e := range c.sim.Events(0) {
		if e.NodeID != node.NodeID {
			continue
		}
		switch e.Type {
		case nomadsim.EventDrainStart:
			drain = e.Details
		case nomadsim.EventAllocStopRequested:
			stopped[e.Details["job"]] = true
		case nomadsim.EventAllocMigrate:
			migrated[e.Details["job"]] = true
		}
	}
	if drain["deadline"] != (2*time.Hour).String() || drain["ignore_system_jobs"] != "true" {
		t.Errorf("drain spec %v, want the group's deadline 2h0m0s and system jobs ignored", drain)
	}
	if !stopped["cache"] || migrated["cache"] {
		t.Errorf("cache: stopped %v, migrated %v; want stopped only", stopped["cache"], migrated["cache"])
	}
	if stopped["api"] || !migrated["api"] {
		t.Errorf("api: stopped %v, migrated %v; want migrated only", stopped["api"], migrated["api"])
	}
}

// With healthy.consul_checks, a rebooted host whose service check fails in
// Consul keeps its slot, with the check named in `rollboot status`; the check
// passing again releases it at once: the coordinator watches the node's checks
// in Consul (a check changes no Nomad data), with the production resync of 30s.
func TestRejoinConsulChecks(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{servers: 3, clients: 2, coordinators: 1, autoUnseal: true, resync: productionResync,
		jobs: []nomadsim.JobSpec{{ID: "api", Type: "system"}},
		policy: `group "clients" {
  filter = "NodePool == \"default\""
  healthy {
    consul_checks = true
  }
}`})
	c.start()
	h := c.clients()[0]
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 5 })
	if err := c.sim.SetServiceCheckFailing(h, "api", true); err != nil {
		t.Fatal(err)
	}
	c.needReboot(h)
	c.waitFor("the host held by its failing check", time.Minute, func() bool {
		return strings.Contains(c.waitingOf(h), `waiting for Consul checks to pass: service:api-api critical`)
	})
	start := time.Now()
	if err := c.sim.SetServiceCheckFailing(h, "api", false); err != nil {
		t.Fatal(err)
	}
	c.within("check passing → slot freed", start, func() bool { return c.plans()[h].Phase == store.PhaseIdle })
}

// ignore_system_jobs = false would stop the agents, which run as a system job:
// the host is held before its drain, with the reason in `rollboot status`.
func TestDrainSystemJobsHoldsWhenTheAgentIsOne(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, policy: `group "all" {
  drain {
    ignore_system_jobs = false
  }
}`})
	c.start()
	h := c.clients()[0]
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.needReboot(h)
	c.waitFor("the host held", time.Minute, func() bool {
		return strings.Contains(c.waitingOf(h), "drain.ignore_system_jobs = false would stop rollboot's agent (system job default/rollboot)")
	})
	if c.drainStarted(h) {
		t.Fatal("the node was drained")
	}
}

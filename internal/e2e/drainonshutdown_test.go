package e2e

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// Clients with drain_on_shutdown drain their own node when the agent's reboot
// stops them (after rollboot's drain, so it finds nothing but, without
// ignore_system_jobs, the system jobs to move). Each cycle goes on to its
// rejoin and ends "rebooted": the client's drain is not taken for an
// operator's (no "interrupted" attempt, no backoff), and every node is made
// eligible again although the client's drain left it ineligible.
func TestDrainOnShutdownIsNotAFailedDrain(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, policy: `group "all" {
  concurrency = 1
}`, jobs: []nomadsim.JobSpec{
		{ID: "web", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "web", Count: 2}}},
		{ID: "exporter", Type: "system"},
	}})
	hosts := c.clients()
	self := map[string]*nomadsim.DrainOnShutdown{
		hosts[0]: {Deadline: 10 * time.Second, IgnoreSystemJobs: true},
		hosts[1]: {Deadline: 10 * time.Second}, // the system jobs too
	}
	for h, d := range self {
		if err := c.sim.SetDrainOnShutdown(h, d); err != nil {
			t.Fatal(err)
		}
	}
	c.start()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 40*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all", hosts[2]: "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	for _, r := range c.history() {
		if r.Outcome != "rebooted" {
			t.Errorf("%s: history %q (%s), want rebooted", r.Host, r.Outcome, r.Error)
		}
	}
	for h := range self {
		n, err := c.sim.Node(h)
		if err != nil {
			t.Fatal(err)
		}
		// The client did drain itself: its drain is the node's last.
		if n.LastDrain == nil || n.LastDrain.AccessorID != "client:"+n.ID {
			t.Errorf("%s: last drain %+v, want the client's own on shutdown", h, n.LastDrain)
		}
		if n.SchedulingEligibility != "eligible" {
			t.Errorf("%s: eligibility %s after its cycle, want eligible", h, n.SchedulingEligibility)
		}
	}
}

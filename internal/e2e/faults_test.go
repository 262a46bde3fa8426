package e2e

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// slowDrains makes each drain take a while (6 allocations of one group moved one at
// a time), so a test can act while a drain is under way.
var slowDrains = []nomadsim.JobSpec{
	{ID: "api", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 9, MigrateMaxParallel: 1}}},
	{ID: "exporter", Type: "system"},
}

// killLeaderAt kills the leading standalone coordinator (SIGKILL) as soon as some
// host enters phase, and checks that the other coordinator finishes the rollout.
func killLeaderAt(t *testing.T, phase string) {
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 2, migrateTime: 200 * time.Millisecond, jobs: slowDrains,
		policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	c.waitFor("a coordinator to lead", 30*time.Second, func() bool { return c.leader() != "" })
	c.needReboot(hosts...)
	var victim string
	c.waitFor("a host in "+phase, 30*time.Second, func() bool {
		for _, p := range c.plans() {
			if p.Phase == phase {
				victim = p.Host
				return true
			}
		}
		return false
	})
	killed := c.leader()
	c.killCoordinator(killed)
	t.Logf("killed %s while %s was %s", killed, victim, phase)
	// The lock expires 2×TTL + lock delay after the last renewal (nomad/locks.go),
	// then the other candidate takes over and finishes.
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	if now := c.leader(); now == "" || now == killed {
		t.Errorf("leader after the kill = %q", now)
	}
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all", hosts[2]: "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

func TestCoordinatorKilledMidDrain(t *testing.T) {
	t.Parallel()
	killLeaderAt(t, store.PhaseDraining)
}

func TestCoordinatorKilledMidRejoin(t *testing.T) {
	t.Parallel()
	killLeaderAt(t, store.PhaseRejoining)
}

// An agent killed right before it reboots (after the drain, during its reboot
// delay) comes back on the same boot, sees the grant is still for this boot, and
// reboots exactly once.
func TestAgentKilledBeforeReboot(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, rebootExtra: `    delay = "1500ms"`, jobs: slowDrains[1:]})
	c.start()
	hosts := c.clients()
	c.needReboot(hosts[0])
	c.waitFor("the agent to start its reboot", 30*time.Second, func() bool {
		h, err := c.st.Host(t.Context(), hosts[0])
		return err == nil && h.RebootingGrant != ""
	})
	c.sup.Kill(hosts[0], true) // a crash: the supervisor starts it again on the same boot
	c.waitFor("the host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 0}})
}

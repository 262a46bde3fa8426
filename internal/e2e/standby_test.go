package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
)

// standingBy lists the live coordinator processes that hold a standby slot and do
// not lead (each logs "standing by" when it takes a slot, and "elected
// coordinator" when it then takes the leader lock).
func (c *cluster) standingBy(skip map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.coords {
		if c.exited[name] || skip[name] {
			continue
		}
		log := c.logs[name].String()
		if strings.LastIndex(log, "standing by") > strings.LastIndex(log, "elected coordinator") {
			out = append(out, name)
		}
	}
	return out
}

// With five coordinator candidates and two standby slots: when the leader and
// the standbys are killed at once (SIGKILL: nothing is released, every lock only
// expires), one of the others takes over and reboots the hosts. The census
// counts no candidate (the coordinators here run apart from the hosts' agents,
// whose records do not stand; fewer than 15 in any case), so the others contend
// for the leader lock themselves rather than stay quiet
// (coordinator/standby_test.go has quiet ones).
func TestCoordinatorsTakeOverFromLeaderAndStandbys(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 5, policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	killed := map[string]bool{}
	var leader string
	var standbys []string
	c.waitFor("a leader and a standby", time.Minute, func() bool {
		leader = c.leader()
		standbys = c.standingBy(map[string]bool{leader: true})
		return leader != "" && len(standbys) > 0
	})
	for _, name := range append([]string{leader}, standbys...) {
		killed[name] = true
		c.killCoordinator(name)
	}
	t.Logf("killed the leader %s and the standbys %v", leader, standbys)
	// The lock expires 2×TTL + lock delay (30s) after its last renewal.
	start := time.Now()
	c.waitFor("another coordinator to lead", 2*time.Minute, func() bool {
		l := c.leader()
		return l != "" && !killed[l]
	})
	t.Logf("%s leads %s after the kill", c.leader(), time.Since(start).Round(time.Second))
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

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
	for name, cmd := range c.coords {
		if cmd.ProcessState != nil || skip[name] {
			continue
		}
		log := c.logs[name].String()
		if strings.LastIndex(log, "standing by") > strings.LastIndex(log, "elected coordinator") {
			out = append(out, name)
		}
	}
	return out
}

// With five coordinator candidates, two standby slots: when the leader and both
// standbys are killed at once (SIGKILL: nothing is released, every lock only
// expires), one of the two quiet candidates takes a freed slot, then the leader
// lock, and reboots the hosts.
func TestQuietCoordinatorsTakeOver(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 5, policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	killed := map[string]bool{}
	var leader string
	var standbys []string
	// A standby that takes the leader lock frees its slot; a quiet candidate
	// takes it within about a minute of the first census (a census of 2 hosts).
	c.waitFor("a leader and two standbys", 3*time.Minute, func() bool {
		leader = c.leader()
		standbys = c.standingBy(map[string]bool{leader: true})
		return leader != "" && len(standbys) == 2
	})
	for _, name := range append([]string{leader}, standbys...) {
		killed[name] = true
		c.killCoordinator(name)
	}
	t.Logf("killed the leader %s and the standbys %v", leader, standbys)
	// The locks expire 2×TTL + lock delay (30s) after their last renewal; a
	// quiet candidate tries a slot about once a minute here (a census of 2).
	start := time.Now()
	c.waitFor("a quiet coordinator to lead", 4*time.Minute, func() bool {
		l := c.leader()
		return l != "" && !killed[l]
	})
	t.Logf("%s leads %s after the kill", c.leader(), time.Since(start).Round(time.Second))
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

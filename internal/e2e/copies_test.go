package e2e

import (
	"context"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/store"
)

// A leader that stops leaves copies of the plans and host records behind
// (store/copies.go): the next leader's first pass takes them from there
// instead of reading each one, and the rollout it then carries out keeps
// every invariant.
func TestNewLeaderTakesPlansAndRecordsFromCopies(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 12, coordinators: 1, policy: `group "all" {
  concurrency = 4
}`})
	c.start()
	hosts := c.clients()
	ctx := context.Background()
	setPause := func(paused bool) {
		t.Helper()
		if _, err := c.st.UpdateControl(ctx, func(ctl *store.Control) error {
			ctl.Paused, ctl.PauseReason, ctl.PausedAt = paused, "e2e: every host pending", time.Now().UTC()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setPause(true)
	c.needReboot(hosts...)
	c.waitFor("every host pending", time.Minute, func() bool {
		plans := c.plans()
		for _, h := range hosts {
			if plans[h].Phase != store.PhasePending {
				return false
			}
		}
		return true
	})
	c.waitFor("the copies written", time.Minute, func() bool {
		l, _, err := c.client.Variables().PrefixList("rollboot/copies/", &api.QueryOptions{})
		return err == nil && len(l) > 0
	})
	first := c.leader()
	c.mu.Lock()
	c.killed[first] = true
	c.mu.Unlock()
	if err := c.signalCoordinator(first, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.startCoordinator("coordinator-2")
	line := regexp.MustCompile(`msg="plans and host records read".* from_copies=(\d+) read_one_by_one=(\d+)`)
	var m []string
	c.waitFor("coordinator-2's first pass", time.Minute, func() bool {
		m = line.FindStringSubmatch(c.logText("coordinator-2"))
		return m != nil
	})
	used, _ := strconv.Atoi(m[1])
	read, _ := strconv.Atoi(m[2])
	t.Logf("the new leader took %d plans and records from the copies and read %d", used, read)
	if want := len(hosts); used < want {
		t.Errorf("the new leader took %d of the %d plans and records from the copies, want at least %d", used, used+read, want)
	}
	setPause(false)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	group := map[string]string{}
	for _, h := range hosts {
		group[h] = "all"
	}
	c.mustHold(invariants.Spec{Group: group, Concurrency: map[string]int{"all": 4},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

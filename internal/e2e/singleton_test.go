package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// A group with singletons = "hold": the node that runs the only instance of a
// job's task group (count = 1) is held, with the job named in status, while
// another host of the group reboots; `rollboot approve` lets it drain.
func TestSingletonHeldUntilApproved(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1,
		jobs: []nomadsim.JobSpec{{ID: "ledger", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "db", Count: 1}}}},
		policy: `group "all" {
  singletons = "hold"
}`})
	c.start()
	var single string
	c.waitFor("the singleton to run", 30*time.Second, func() bool {
		allocs, _, err := c.client.Jobs().Allocations("ledger", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning {
				single = a.NodeName
				return true
			}
		}
		return false
	})
	other := c.clients()[0]
	if other == single {
		other = c.clients()[1]
	}
	c.needReboot(single, other)
	c.waitFor(other+", which runs no singleton, rebooted", 60*time.Second, c.rebootedAll([]string{other}))
	const why = "runs the only instance of job group ledger.db (count = 1): a drain stops it; rollboot approve "
	c.waitFor(single+" held for its singleton", 30*time.Second, func() bool {
		p := c.plans()[single]
		return p.Phase == store.PhasePending && strings.Contains(p.Waiting, why+single)
	})
	if out := c.cli("status"); !strings.Contains(out, why+single) {
		t.Errorf("status does not say why %s waits:\n%s", single, out)
	}
	if out := c.cli("plan"); !strings.Contains(out, "ledger.db") {
		t.Errorf("plan does not say why %s waits:\n%s", single, out)
	}
	if c.drainStarted(single) {
		t.Fatalf("%s was drained though it runs a singleton and no approval was given", single)
	}

	out := c.cli("approve", single, "--for", "10m")
	if !strings.Contains(out, single+" may drain") {
		t.Fatalf("approve: %s", out)
	}
	c.waitFor(single+" rebooted once approved", 60*time.Second, c.rebootedAll([]string{single}))
}

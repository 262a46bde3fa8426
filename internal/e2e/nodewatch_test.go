package e2e

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// Without Nomad's node event stream (servers run with enable_event_broker =
// false: a 500 up to Nomad 1.11.1, 200 and an immediate close from 1.11.2)
// the coordinator follows the nodes with blocking queries: a rollout at the
// production resync takes about as long as with the stream, where it once
// waited for the resync at every drain's end and every node's return. The
// three rollouts run one after another, alone (this test is not parallel), so
// that the makespans compare.
//
// Run: go test -count=1 -v -run TestRolloutWithoutEventStream ./internal/e2e/
// (-nodewatch-hosts=50: the 50 hosts, 2 groups of 5 at a time).
func TestRolloutWithoutEventStream(t *testing.T) {
	type run struct {
		name     string
		version  string
		disabled bool
	}
	runs := []run{{"stream", "1.11.1", false}, {"broker off, 500 (1.11.1)", "1.11.1", true},
		{"broker off, 200 then close (1.11.2)", "1.11.2", true}}
	var base time.Duration
	for _, r := range runs {
		took, reqs, status := rolloutMakespan(t, r.version, r.disabled)
		t.Logf("%-36s makespan %6s, whole node lists %d, filtered lists %d, single-node reads %d, stream subscriptions %d",
			r.name, took.Round(10*time.Millisecond), reqs["GET /v1/nodes"], reqs["GET /v1/nodes?filter"],
			reqs["GET /v1/node/:id"], reqs["GET /v1/event/stream"])
		if r.disabled {
			if !strings.Contains(status, "blocking queries") {
				t.Errorf("%s: status does not say the nodes are followed with blocking queries:\n%s", r.name, status)
			}
			if limit := base * 3 / 2; took > limit {
				t.Errorf("%s: the rollout took %s, more than 1.5× the %s it took with the stream", r.name, took, base)
			}
			// The whole list: once when the stream fails, then once per
			// resync, and once per try of the stream (every 30 s or more).
			if limit := uint64(2 + 2*int(took/productionResync)); reqs["GET /v1/nodes"] > limit {
				t.Errorf("%s: %d whole node lists in %s, want at most %d (one per resync interval)", r.name, reqs["GET /v1/nodes"], took, limit)
			}
		} else {
			base = took
		}
	}
}

var nodeWatchHosts = flag.Int("nodewatch-hosts", 8, "TestRolloutWithoutEventStream: clients, in two groups of a tenth of them (at least 2) at a time")

// rolloutMakespan reboots every client of a cluster (-nodewatch-hosts) in 2
// groups at the production resync, and returns how long it took, the
// requests the emulator answered by route, and `rollboot status` after the
// rollout.
func rolloutMakespan(t *testing.T, version string, brokerOff bool) (time.Duration, map[string]uint64, string) {
	var took time.Duration
	reqs := map[string]uint64{}
	var status string
	t.Run(version+fmt.Sprintf("/broker_off=%v", brokerOff), func(t *testing.T) {
		conc := max(2, *nodeWatchHosts/10)
		c := newCluster(t, clusterOpts{clients: *nodeWatchHosts, pools: []string{"a", "b"}, coordinators: 1, resync: productionResync,
			simConfig: func(cfg *nomadsim.Config) { cfg.NomadVersion, cfg.EventBrokerDisabled = version, brokerOff },
			policy: fmt.Sprintf(`group "a" {
  filter = "NodePool == \"a\""
  concurrency = %d
}
group "b" {
  filter = "NodePool == \"b\""
  concurrency = %d
}`, conc, conc)})
		c.start()
		hosts := c.clients()
		c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
		c.sim.ResetRequestStats()
		start := time.Now()
		c.needReboot(hosts...)
		c.waitFor("every host rebooted", 4*productionResync, c.rebootedAll(hosts))
		took = time.Since(start)
		status = c.cli("status")
		for _, rs := range c.sim.RequestStats().Routes {
			reqs[rs.Route] = rs.Requests
		}
		c.mustHold(invariants.Spec{Group: c.groupsByPool(), Concurrency: map[string]int{"a": conc, "b": conc},
			EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	})
	return took, reqs, status
}

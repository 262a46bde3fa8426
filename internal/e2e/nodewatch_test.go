package e2e

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
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
	skipInShort(t)
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

// Without the event stream a pending host's node is in the coordinator's list
// as the last whole list showed it, up to a resync ago. An operator drains it
// meanwhile: the pass that would grant it reads its node from Nomad first, and
// holds it for the operator, as with the stream.
func TestOperatorDrainWithoutEventStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		simConfig:   func(cfg *nomadsim.Config) { cfg.EventBrokerDisabled = true },
		jobs:        []nomadsim.JobSpec{{ID: "exporter", Type: "system"}},
		rebootExtra: "    delay = \"2s\""})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts...)
	var first, second string
	c.waitFor("a host granted", 30*time.Second, func() bool {
		for i, h := range hosts {
			if p := c.plans()[h]; p.Phase == store.PhaseDrained || p.Phase == store.PhaseRebooting {
				first, second = h, hosts[1-i]
				return true
			}
		}
		return false
	})
	n, err := c.sim.Node(second)
	if err != nil {
		t.Fatal(err)
	}
	// Its system jobs stay (the agent too): the grant's own checks would pass.
	spec := &api.DrainSpec{Deadline: 3 * time.Second, IgnoreSystemJobs: true}
	if _, err := c.client.Nodes().UpdateDrainOpts(n.ID, &api.DrainOptions{DrainSpec: spec, Meta: map[string]string{"message": "maintenance"}}, nil); err != nil {
		t.Fatal(err)
	}
	c.waitFor(first+" rebooted", 60*time.Second, c.rebootedAll([]string{first}))
	c.waitFor(second+" held for the operator", 10*time.Second, func() bool {
		return strings.Contains(c.waitingOf(second), "left ineligible by a drain rollboot did not start")
	})
	if p := c.plans()[second]; p.Phase != store.PhasePending {
		t.Fatalf("%s is %s (grant %s): it was granted over the operator's drain", second, p.Phase, p.GrantID)
	}
	if _, err := c.client.Nodes().ToggleEligibility(n.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	c.waitFor(second+" rebooted once given back", 2*productionResync, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

// The stream fails in each way Nomad's can during a rollout at the production
// resync: a subscriber cut off for reading too slowly ("event dropped from
// buffer"), every subscription ended by a snapshot restore, and a stream that
// stays open and silent (served by a follower cut off from the leader), and a
// subscription closed when an ACL policy change takes its token's node:read
// away for a moment (with ACLs on and the shipped policies' tokens). The
// rollout completes with the invariants held, the coordinator follows the nodes
// without the stream meanwhile (one whole node list per resync interval), and
// says so once. A silent stream is given up 2 s after it failed to show the
// coordinator's own first drain.
//
// Run: go test -count=1 -v -run TestRolloutThroughStreamFailures ./internal/e2e/
func TestRolloutThroughStreamFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(*nomadsim.Config)
		acl  bool // ACLs on, each process with its shipped policy's token
		// refused: whole node lists Nomad may refuse while the coordinator
		// lacks the right (the follower's and a pass's, each tried again
		// after 1 s, then 2 s), on top of one per resync interval.
		refused uint64
		during  func(t *testing.T, c *cluster)
		log     string // what the coordinator's one line says
	}{
		{name: "dropped", cfg: func(cfg *nomadsim.Config) { cfg.EventBufferSize = 4 },
			during: func(t *testing.T, c *cluster) {
				if err := c.sim.SetEventSubscriberDelay(100 * time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}, log: "node event stream"},
		{name: "snapshot restore", during: func(t *testing.T, c *cluster) {
			c.waitFor("a drain", 30*time.Second, func() bool { return c.drainStarted(c.clients()[0]) || c.drainStarted(c.clients()[1]) })
			c.sim.RestoreSnapshot()
		}, log: "node event stream"},
		{name: "silent", during: func(t *testing.T, c *cluster) { c.sim.SetEventStreamSilent(true) }, log: "the node event stream is silent"},
		{name: "acl change", acl: true, refused: 4, during: func(t *testing.T, c *cluster) {
			c.waitFor("a drain", 30*time.Second, func() bool { return c.drainStarted(c.clients()[0]) || c.drainStarted(c.clients()[1]) })
			withoutNodeRead(t, c, time.Second)
		}, log: "node event stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, clusterOpts{clients: 4, coordinators: 1, resync: productionResync, simConfig: tc.cfg, acl: tc.acl,
				policy: "group \"all\" {\n  concurrency = 2\n}"})
			if tc.acl {
				tokens := mintTokens(t, c.client)
				c.opts.agentToken, c.opts.coordToken = tokens["rollboot-agent"], tokens["rollboot-coordinator"]
			}
			c.start()
			hosts := c.clients()
			c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
			c.sim.ResetRequestStats()
			start := time.Now()
			c.needReboot(hosts...)
			tc.during(t, c)
			c.waitFor("every host rebooted", 4*productionResync, c.rebootedAll(hosts))
			took := time.Since(start)
			reqs := map[string]uint64{}
			for _, rs := range c.sim.RequestStats().Routes {
				reqs[rs.Route] = rs.Requests
			}
			t.Logf("%s: makespan %s, whole node lists %d, single-node reads %d", tc.name, took.Round(10*time.Millisecond),
				reqs["GET /v1/nodes"], reqs["GET /v1/node/:id"])
			if limit := 3 + 2*uint64(took/productionResync) + tc.refused; reqs["GET /v1/nodes"] > limit {
				t.Errorf("%d whole node lists in %s, want at most %d (one per resync interval)", reqs["GET /v1/nodes"], took, limit)
			}
			var said []string
			for _, l := range strings.Split(c.logText("coordinator-1"), "\n") {
				if strings.Contains(l, "the node event stream cannot be had") {
					said = append(said, l)
				}
			}
			if len(said) != 1 || !strings.Contains(said[0], tc.log) {
				t.Errorf("the coordinator said that the stream cannot be had %d times, want once, saying %q: %q", len(said), tc.log, said)
			} else {
				t.Logf("%s: %s", tc.name, said[0][strings.Index(said[0], "msg="):])
			}
			c.mustHold(invariants.Spec{Group: allIn(hosts, "all"), Concurrency: map[string]int{"all": 2},
				EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
		})
	}
}

// withoutNodeRead takes node rights away from the rollboot-coordinator ACL
// policy for d, as an operator's mistaken `nomad acl policy apply` and its
// correction would: Nomad closes the coordinator's node event subscription at
// the first write (nomad/stream/event_broker.go
// checkSubscriptionsAgainstACLChange), and refuses its node reads and drains
// until the second.
func withoutNodeRead(t *testing.T, c *cluster, d time.Duration) {
	t.Helper()
	const name = "rollboot-coordinator"
	rules := aclPolicyFile(t, name)
	denied := strings.Replace(rules, "node {\n  policy = \"write\"\n}", "node {\n  policy = \"deny\"\n}", 1)
	if denied == rules {
		t.Fatalf("the %s policy has no node write rule to take away", name)
	}
	for i, r := range []string{denied, rules} {
		if i > 0 {
			time.Sleep(d)
		}
		if _, err := c.client.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: r}, nil); err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
	}
}

// allIn puts every host in group g.
func allIn(hosts []string, g string) map[string]string {
	out := map[string]string{}
	for _, h := range hosts {
		out[h] = g
	}
	return out
}

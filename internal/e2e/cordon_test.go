package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// With node_meta.cordon_next, the node of the host next in line is made
// ineligible while the host before it drains: the allocation that drain moves
// goes to the busier node that needs no reboot, where the emulator (least
// loaded first) would otherwise put it on the next one. Canceling the next
// host's request gives its node back; asked again, it is cordoned again, and
// once its turn comes it is drained, rebooted and eligible, as every node at
// the end. The first host waits in a pre-reboot hook until the test lets it
// go, so that the cancel meets the next host in line whatever the machine's
// speed.
func TestCordonKeepsMigratedWorkOffTheNextNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync,
		rebootExtra: `    pre_hooks = [["sh", "-c", "while [ ! -e {{host_dir}}/go ]; do sleep 0.05; done"]]`,
		policy: `group "all" {
  concurrency = 1
}
node_meta {
  cordon_next = 1
}`, jobs: []nomadsim.JobSpec{
			// client-3 is the busiest node, and needs no reboot.
			{ID: "filler", Type: "service", Constraints: []nomadsim.ConstraintSpec{{Attribute: "${node.unique.name}", Value: "client-3"}},
				Groups: []nomadsim.GroupSpec{{Name: "filler", Count: 3}}},
			{ID: "web", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "web", Count: 1}}},
		}})
	webOn := func() string {
		var on string
		hosts := c.clients() // before WaitFor, which holds the emulator's lock
		_ = c.sim.WaitFor(context.Background(), func(v *nomadsim.View) bool {
			for _, h := range hosts {
				hv, _ := v.Host(h)
				if _, ok := v.RunningAlloc(hv.NodeID, "web"); ok {
					on = h
				}
			}
			return true
		})
		return on
	}
	c.waitFor("web running", 10*time.Second, func() bool { return webOn() != "" })
	first := webOn()
	if first == "client-3" {
		t.Fatal("web started on the busiest node: the emulator places on the least loaded")
	}
	next := map[string]string{"client-1": "client-2", "client-2": "client-1"}[first]
	node := func(host string) *api.Node {
		n, err := c.sim.Node(host)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	eligible := func(host string) bool { return node(host).SchedulingEligibility == api.NodeSchedulingEligible }

	// Both hosts queued while paused, web's first. Paused, no drain is near:
	// no cordon.
	c.start()
	c.cli("pause", "--reason", "queue the hosts in order")
	c.needReboot(first)
	c.waitFor(first+" pending", 20*time.Second, func() bool { return c.plans()[first].Phase == store.PhasePending })
	c.needReboot(next)
	c.waitFor(next+"'s node marked not cordoned", 20*time.Second, func() bool {
		return c.plans()[next].Phase == store.PhasePending && node(next).Meta["rollboot_cordoned"] == "false"
	})
	if !eligible(next) || !c.plans()[next].CordonedAt.IsZero() {
		t.Fatalf("%s cordoned while the rollout is paused", next)
	}

	// Resumed: first drains, next is cordoned before web moves.
	c.cli("resume")
	cordoned := func() bool {
		p := c.plans()[next]
		return p.Phase == store.PhasePending && !p.CordonedAt.IsZero() && !eligible(next) && node(next).Meta["rollboot_cordoned"] == "true"
	}
	c.waitFor(next+" cordoned while "+first+" drains", 20*time.Second, cordoned)
	c.waitFor("web moved off "+first, 20*time.Second, func() bool { on := webOn(); return on != "" && on != first })
	if on := webOn(); on != "client-3" {
		t.Fatalf("web moved to %s: want client-3, not the cordoned node next in line", on)
	}
	if out := c.cli("status"); !strings.Contains(out, "cordoned: node ineligible until its drain") {
		t.Errorf("rollboot status does not say %s is cordoned:\n%s", next, out)
	}
	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	if out := c.cli("plan", "--config", cfg); !strings.Contains(out, "; cordoned") {
		t.Errorf("rollboot plan does not say %s is cordoned:\n%s", next, out)
	}
	if d := node(next).LastDrain; d != nil {
		t.Errorf("%s's node was drained (%+v): a cordon is no drain", next, d)
	}

	// Canceled while next in line: its node is given back.
	c.waitFor(first+" waiting in its pre-reboot hook", 20*time.Second, func() bool { return c.plans()[first].Phase == store.PhaseRebooting })
	c.cli("cancel", next)
	c.waitFor(next+"'s node given back", 20*time.Second, func() bool {
		p := c.plans()[next]
		return p.Phase == store.PhaseIdle && p.CordonedAt.IsZero() && eligible(next) && node(next).Meta["rollboot_cordoned"] == "false"
	})

	// Asked again: cordoned again, then drained, rebooted and given back.
	c.cli("request", next)
	c.waitFor(next+" cordoned again", 20*time.Second, cordoned)
	for _, h := range c.clients() {
		hv, ok := c.sim.Host(h)
		if !ok {
			t.Fatalf("no host %s", h)
		}
		if err := os.WriteFile(filepath.Join(hv.Dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hosts := []string{first, next}
	c.waitFor("both hosts rebooted", 60*time.Second, c.rebootedAll(hosts))
	for _, h := range c.clients() {
		if !eligible(h) || node(h).Meta["rollboot_cordoned"] == "true" {
			c.waitFor(h+"'s node eligible, not marked cordoned", 20*time.Second, func() bool {
				return eligible(h) && node(h).Meta["rollboot_cordoned"] == "false"
			})
		}
	}
	c.mustHold(invariants.Spec{Group: map[string]string{first: "all", next: "all", "client-3": "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(c.clients()), Reboots: map[string]int{first: 1, next: 1, "client-3": 0}})
}

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// steeringExample is the job of docs/deploy.md's steering example: the first
// HCL block after its marker.
func steeringExample(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- steering example:")
	if !ok {
		t.Fatal("docs/deploy.md has no steering example")
	}
	_, block, ok := strings.Cut(after, "```hcl\n")
	if !ok {
		t.Fatal("docs/deploy.md: no HCL block after the steering example's marker")
	}
	job, _, _ := strings.Cut(block, "```")
	return job
}

// With node_meta.next_in_line, the job of the docs' steering example keeps
// the allocation a drain moves off the node drained next: of the two nodes
// left, it goes to the busier one that needs no reboot, where without the
// marks the emulator (least loaded first) would put it on the next one. The
// operator's keys are on a node during its cycle and replaced after it.
func TestSteeringKeepsMigratedWorkOffTheNextNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, policy: `group "all" {
  concurrency = 1
}
node_meta {
  next_in_line = 2
  before_drain = { maintenance = "true" }
  after_rejoin = { maintenance = "", patched = "yes" }
}`, jobs: []nomadsim.JobSpec{
		// client-3 is the busiest node, and needs no reboot.
		{ID: "filler", Type: "service", Constraints: []nomadsim.ConstraintSpec{{Attribute: "${node.unique.name}", Value: "client-3"}},
			Groups: []nomadsim.GroupSpec{{Name: "filler", Count: 3}}},
	}})
	job, err := c.client.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: steeringExample(t)})
	if err != nil {
		t.Fatalf("parse the docs' steering example: %v", err)
	}
	if _, _, err := c.client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
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
	meta := func(host, key string) string {
		n, err := c.sim.Node(host)
		if err != nil {
			t.Fatal(err)
		}
		return n.Meta[key]
	}

	// Both hosts queued while paused, web's first: its node is drained first,
	// and the other is next in line, marked while web's allocation moves.
	c.start()
	c.cli("pause", "--reason", "queue the hosts in order")
	c.needReboot(first)
	c.waitFor(first+" pending", 20*time.Second, func() bool { return c.plans()[first].Phase == store.PhasePending })
	c.needReboot(next)
	c.waitFor(next+" pending", 20*time.Second, func() bool { return c.plans()[next].Phase == store.PhasePending })
	c.waitFor(next+"'s node marked next in line", 20*time.Second, func() bool {
		return meta(next, "rollboot_next") == "true" && meta(first, "rollboot_next") == "true" && meta("client-3", "rollboot_next") == "false"
	})
	c.cli("resume")
	c.waitFor(first+"'s node carries the operator's key of its cycle", 20*time.Second, func() bool { return meta(first, "maintenance") == "true" })
	c.waitFor("web moved off "+first, 20*time.Second, func() bool { on := webOn(); return on != "" && on != first })
	if on := webOn(); on != "client-3" {
		t.Fatalf("web moved to %s, the node next in line: want client-3", on)
	}
	hosts := []string{first, next}
	c.waitFor("both hosts rebooted", 30*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: map[string]string{first: "all", next: "all", "client-3": "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(c.clients()), Reboots: map[string]int{first: 1, next: 1, "client-3": 0}})
	// After their cycles: the after_rejoin keys, no mark left.
	c.waitFor("the rebooted nodes carry after_rejoin's keys", 20*time.Second, func() bool {
		for _, h := range hosts {
			if meta(h, "patched") != "yes" || meta(h, "maintenance") != "" || meta(h, "rollboot_next") != "false" {
				return false
			}
		}
		return true
	})
	if meta("client-3", "patched") != "" || meta("client-3", "maintenance") != "" {
		t.Errorf("client-3, never rebooted, carries operator keys: %v", func() map[string]string { n, _ := c.sim.Node("client-3"); return n.Meta }())
	}
	if on := webOn(); on != "client-3" {
		t.Errorf("web ended on %s: want it left on client-3", on)
	}
}

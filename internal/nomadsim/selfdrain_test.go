package nomadsim

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A client with drain_on_shutdown drains its own node before its host goes
// down: the drain is recorded as the client's ("client:<node ID>", meta
// message "shutting down"), the host stays up until the node's allocations
// moved, and the node comes back from the reboot ineligible. A client
// without it goes down at once, its node untouched.
func TestDrainOnShutdown(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, HeartbeatTTL: 150 * time.Millisecond, BootTime: 200 * time.Millisecond,
		MigrateTime: 100 * time.Millisecond})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "web", Type: "service", Groups: []GroupSpec{{Name: "g", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	var on string // the node the allocation runs on
	if err := s.WaitFor(ctx, func(v *View) bool {
		for _, h := range []string{"client-1", "client-2"} {
			hv, _ := v.Host(h)
			if _, ok := v.RunningAlloc(hv.NodeID, "web"); ok {
				on = h
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"client-1": "client-2", "client-2": "client-1"}[on]
	if err := s.SetDrainOnShutdown(on, &DrainOnShutdown{Deadline: time.Minute, IgnoreSystemJobs: true}); err != nil {
		t.Fatal(err)
	}
	id, otherID := nodeID(t, s, on), nodeID(t, s, other)
	if err := s.Reboot(on); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot(on); err == nil {
		t.Fatal("a second reboot while the client drains itself was accepted")
	}
	// The host goes down only once the allocation runs elsewhere.
	var movedFirst bool
	if err := s.WaitFor(ctx, func(v *View) bool {
		h, _ := v.Host(on)
		if !h.Up {
			_, movedFirst = v.RunningAlloc(otherID, "web")
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if !movedFirst {
		t.Fatal("the host went down before its client's drain moved the allocation")
	}
	if err := s.WaitFor(ctx, func(v *View) bool {
		h, _ := v.Host(on)
		n, _ := v.Node(id)
		return h.Up && n.Status == api.NodeStatusReady
	}); err != nil {
		t.Fatal(err)
	}
	n, _, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ld := n.LastDrain; ld == nil || ld.AccessorID != "client:"+id || ld.Meta["message"] != "shutting down" || ld.Status != api.DrainStatusComplete {
		t.Fatalf("last drain %+v: want the client's own, complete", ld)
	}
	if n.SchedulingEligibility != api.NodeSchedulingIneligible {
		t.Fatalf("eligibility %s after the reboot: Nomad keeps a drained node ineligible", n.SchedulingEligibility)
	}

	// Without drain_on_shutdown: down at once, no drain.
	before, _, _ := c.Nodes().Info(otherID, nil)
	if err := s.Reboot(other); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.Host(other); h.Up {
		t.Fatal("a host whose client does not drain itself stayed up")
	}
	after, _, _ := c.Nodes().Info(otherID, nil)
	if !reflect.DeepEqual(after.LastDrain, before.LastDrain) || after.DrainStrategy != nil {
		t.Fatalf("last drain %+v, strategy %+v: want the node untouched", after.LastDrain, after.DrainStrategy)
	}
}

// The agent reports its drain_on_shutdown block in /v1/agent/self.
func TestDrainOnShutdownAgentSelf(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1})
	h, _ := s.Host("client-1")
	c := newClient(t, "http://"+h.Addr, "")
	self, err := c.Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := self.Config["Client"].(map[string]any)["Drain"]; ok {
		t.Fatalf("client config %v: no drain_on_shutdown set", self.Config["Client"])
	}
	if err := s.SetDrainOnShutdown("client-1", &DrainOnShutdown{Deadline: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if self, err = c.Agent().Self(); err != nil {
		t.Fatal(err)
	}
	d, _ := self.Config["Client"].(map[string]any)["Drain"].(map[string]any)
	if d == nil || d["Deadline"] != "1h0m0s" || self.Config["LeaveOnTerm"] != true {
		t.Fatalf("config %v: want the drain block and leave_on_terminate", self.Config)
	}
}

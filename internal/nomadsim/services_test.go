package nomadsim

import (
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
)

// The Consul checks of a client host's node carry the service checks of its
// allocations: critical while the group's checks fail, passing once the job is
// fixed and its unhealthy allocation replaced (ReplaceUnhealthy), which the
// client then marks healthy.
func TestServiceChecksAndReplaceUnhealthy(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true, Clients: 1, HealthyDeadline: 500 * time.Millisecond})
	auxWait(t, s, "consul leader", func(v *View) bool { return s.consul.Raft().Leader() != nil })
	var client Host
	for _, h := range s.Hosts() {
		if h.NodeID != "" && h.Name != "server-1" && h.Name != "server-2" && h.Name != "server-3" {
			client = h
		}
	}
	if err := s.AddJob(JobSpec{ID: "web", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "web", FailHealthChecks: true}}}); err != nil {
		t.Fatal(err)
	}
	health := func(v *View) *bool {
		for _, a := range v.Allocs(client.NodeID) {
			if a.JobID == "web" && a.DesiredStatus == api.AllocDesiredStatusRun && a.DeploymentStatus != nil {
				return a.DeploymentStatus.Healthy
			}
		}
		return nil
	}
	auxWait(t, s, "web unhealthy", func(v *View) bool { h := health(v); return h != nil && !*h })
	cc := ccClient(t, s.ConsulAddress())
	status := func() string {
		t.Helper()
		hc, _, err := cc.Health().Node(client.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range hc {
			if c.ServiceName == "web-web" {
				return c.Status
			}
		}
		return "none"
	}
	if got := status(); got != "critical" {
		t.Fatalf("service check %s, want critical", got)
	}
	if err := s.ReplaceUnhealthy("", "web"); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "web healthy", func(v *View) bool { h := health(v); return h != nil && *h })
	if got := status(); got != "passing" {
		t.Fatalf("service check %s, want passing", got)
	}
}

// POST /v1/allocation/:id/stop marks the allocation for migration: the scheduler
// stops it and places its replacement; it needs alloc-lifecycle.
func TestAllocStop(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	if err := s.AddJob(JobSpec{ID: "cache"}); err != nil {
		t.Fatal(err)
	}
	var id string
	hosts := s.Hosts()
	auxWait(t, s, "cache running", func(v *View) bool {
		for _, h := range hosts {
			if aid, ok := v.RunningAlloc(h.NodeID, "cache"); ok {
				id = aid
				return true
			}
		}
		return false
	})
	resp, err := c.Allocations().Stop(&api.Allocation{ID: id}, nil)
	if err != nil || resp.EvalID == "" {
		t.Fatalf("stop: %+v %v", resp, err)
	}
	auxWait(t, s, "cache replaced", func(v *View) bool {
		var stopped, replaced bool
		for _, a := range v.Allocs("") {
			stopped = stopped || (a.ID == id && a.DesiredStatus == api.AllocDesiredStatusStop)
			replaced = replaced || (a.PreviousAllocation == id && a.JobID == "cache")
		}
		return stopped && replaced
	})
	if _, err := c.Allocations().Stop(&api.Allocation{ID: "no-such-alloc"}, nil); err == nil {
		t.Fatal("stop of an unknown allocation succeeded")
	}
}

// A service check made to fail wakes a blocking query on the node's checks.
func TestSetServiceCheckFailing(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true, Clients: 1})
	auxWait(t, s, "consul leader", func(v *View) bool { return s.consul.Raft().Leader() != nil })
	client := s.Hosts()[3]
	if err := s.AddJob(JobSpec{ID: "api", Type: api.JobTypeSystem}); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "api running", func(v *View) bool { _, ok := v.RunningAlloc(client.NodeID, "api"); return ok })
	cc := ccClient(t, s.ConsulAddress())
	_, meta, err := cc.Health().Node(client.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		hc, _, err := cc.Health().Node(client.Name, &consulapi.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 5 * time.Second})
		st := "error"
		if err == nil {
			for _, c := range hc {
				if c.ServiceName == "api-api" {
					st = c.Status
				}
			}
		}
		done <- st
	}()
	time.Sleep(100 * time.Millisecond)
	if err := s.SetServiceCheckFailing(client.Name, "api", true); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-done:
		if st != "critical" {
			t.Fatalf("check %s, want critical", st)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the blocking query did not wake")
	}
}

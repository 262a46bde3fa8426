package nomadsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// `nomad node purge` (PUT /v1/node/:id/purge) removes the node: gone from the
// list and from reads, a NodeDeregistration event, its allocations lost and
// placed elsewhere; it needs node:write, and a second purge finds no node.
func TestNodePurge(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, ACL: true})
	if err := s.AddJob(JobSpec{ID: "web", Type: "service", Groups: []GroupSpec{{Name: "g", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	id := nodeID(t, s, "client-1")
	waitAllocsRunning(t, c, "web", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: {"*"}}, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}

	anon := newClient(t, s.Address(), "")
	if _, _, err := anon.Nodes().Purge(id, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("purge without a token: %v, want 403", err)
	}
	resp, _, err := c.Nodes().Purge(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeModifyIndex == 0 {
		t.Fatalf("response %+v", resp)
	}
	if _, _, err := c.Nodes().Info(id, nil); err == nil || !strings.Contains(err.Error(), "node not found") {
		t.Fatalf("read after the purge: %v", err)
	}
	list, meta, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID == id || meta.LastIndex < resp.NodeModifyIndex {
		t.Fatalf("list after the purge: %d nodes, index %d", len(list), meta.LastIndex)
	}
	for got := false; !got; {
		select {
		case evs := <-events:
			if evs == nil || evs.Err != nil {
				t.Fatalf("stream: %+v", evs)
			}
			for _, e := range evs.Events {
				got = got || (e.Type == "NodeDeregistration" && e.Key == id && e.Index == resp.NodeModifyIndex)
			}
		case <-ctx.Done():
			t.Fatal("no NodeDeregistration event")
		}
	}
	allocs, _, err := c.Jobs().Allocations("web", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		if a.NodeID == id && a.ClientStatus != api.AllocClientStatusLost {
			t.Errorf("allocation %s on the purged node is %s, want lost", a.ID, a.ClientStatus)
		}
	}
	waitAllocsRunning(t, c, "web", 2) // placed again on the other node
	if _, _, err := c.Nodes().Purge(id, nil); err == nil || !strings.Contains(err.Error(), "node not found") {
		t.Fatalf("second purge: %v", err)
	}
}

// waitAllocsRunning waits for n running allocations of job.
func waitAllocsRunning(t *testing.T, c *api.Client, job string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		allocs, _, err := c.Jobs().Allocations(job, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning && a.DesiredStatus == api.AllocDesiredStatusRun {
				running++
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d running allocations of %s, want %d", running, job, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package nomadsim

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func readBootID(t *testing.T, h Host) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, BootIDFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func runningSystemAllocs(as []*api.Allocation) int {
	n := 0
	for _, a := range as {
		if *a.Job.Type == api.JobTypeSystem && a.DesiredStatus == "run" && (a.ClientStatus == "running" || a.ClientStatus == "pending") {
			n++
		}
	}
	return n
}

func TestRebootDrainedNodeKeepsDrainStateAndSystemAllocsWaitForEligibility(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, HeartbeatTTL: 50 * time.Millisecond, BootTime: 400 * time.Millisecond})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	h, _ := s.Host("client-1")
	id := h.NodeID
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool { return runningSystemAllocs(as) == 1 })

	if err := s.SetRebootRequired("client-1", "kernel update"); err != nil {
		t.Fatal(err)
	}
	if !s.RebootRequired("client-1") || s.RebootRequired("client-2") {
		t.Fatal("sentinel not set")
	}
	resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	runMonitorDrain(ctx, t, c, id, resp.LastIndex, true)
	drained, _, _ := c.Nodes().Info(id, nil)

	local := newClient(t, "http://"+h.Addr, "")
	if _, _, err := local.Nodes().Info(id, nil); err != nil {
		t.Fatalf("local agent before reboot: %v", err)
	}
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("client-1"); err == nil {
		t.Fatal("rebooting a host that is down must fail")
	}
	// The host's agent drops connections while it is down.
	if _, _, err := local.Nodes().Info(id, nil); err == nil {
		t.Fatal("local agent answered while the host is down")
	} else if code, _ := statusOf(err); code != 0 {
		t.Fatalf("want a transport error, got HTTP %d", code)
	}
	// /v1/client/metadata is served by the client: 404 while it is away.
	_, err = c.Nodes().Meta().Read(id, nil)
	wantStatus(t, err, 404, "No path to node")

	down := waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusDown })
	if lastEvent(down).Message != "Node heartbeat missed" {
		t.Fatalf("event %+v", lastEvent(down))
	}
	as, _, _ := c.Nodes().Allocations(id, nil)
	for _, a := range as {
		if a.ClientStatus != "lost" && a.ClientStatus != "complete" {
			t.Fatalf("alloc of %s on down node: %s", a.JobID, a.ClientStatus)
		}
	}

	up := waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusReady })
	h2, _ := s.Host("client-1")
	if h2.BootID == h.BootID || readBootID(t, h2) != h2.BootID || h2.Boots != 1 || !h2.Up {
		t.Fatalf("after boot: %+v", h2)
	}
	if s.RebootRequired("client-1") {
		t.Fatal("the sentinel must be gone after the reboot")
	}
	if lastEvent(up).Message != "Node reregistered by heartbeat" || up.SchedulingEligibility != api.NodeSchedulingIneligible ||
		up.DrainStrategy != nil || up.LastDrain == nil || up.LastDrain.Status != api.DrainStatusComplete ||
		!up.LastDrain.UpdatedAt.Equal(drained.LastDrain.UpdatedAt) {
		t.Fatalf("after re-registration: %s %+v %+v", up.SchedulingEligibility, up.LastDrain, lastEvent(up))
	}
	if _, _, err := local.Nodes().Info(id, nil); err != nil {
		t.Fatalf("local agent after boot: %v", err)
	}
	if _, err := c.Nodes().Meta().Read(id, nil); err != nil {
		t.Fatalf("client metadata after boot: %v", err)
	}

	// The node is ready but ineligible: no system alloc comes back. Watch its
	// allocations for a while (many scheduler rounds).
	_, am, err := c.Nodes().Allocations(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * s.Config().MigrateTime)
	idx := am.LastIndex
	for time.Now().Before(deadline) {
		as, m, err := c.Nodes().Allocations(id, &api.QueryOptions{WaitIndex: idx, WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if runningSystemAllocs(as) != 0 {
			t.Fatal("a system alloc was placed on an ineligible node")
		}
		idx = m.LastIndex
	}

	// Made eligible, it gets its system alloc back.
	if _, err := c.Nodes().ToggleEligibility(id, true, nil); err != nil {
		t.Fatal(err)
	}
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool {
		return slices.ContainsFunc(as, func(a *api.Allocation) bool {
			return *a.Job.Type == api.JobTypeSystem && a.ClientStatus == "running"
		})
	})

	var types []string
	for _, e := range s.Events(0) {
		if e.Host == "client-1" && strings.HasPrefix(e.Type, "host.") || e.Host == "client-1" && strings.HasPrefix(e.Type, "node.") && !strings.HasPrefix(e.Type, "node.drain") {
			types = append(types, e.Type)
		}
	}
	want := []string{EventHostAdded, EventHostRebootNeeded, EventHostRebootStart, EventNodeDown, EventHostBoot, EventNodeReady, EventEligibility}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v; want %v", types, want)
	}
}

func TestRebootUndrainedNodeReplacesServiceAllocs(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, HeartbeatTTL: 50 * time.Millisecond, BootTime: 200 * time.Millisecond})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	id1, id2 := nodeID(t, s, "client-1"), nodeID(t, s, "client-2")
	waitAllocs(ctx, t, c, id1, func(as []*api.Allocation) bool { return len(as) == 2 })
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	// The lost web alloc is replaced on client-2.
	waitAllocs(ctx, t, c, id2, func(as []*api.Allocation) bool {
		n := 0
		for _, a := range as {
			if a.JobID == "web" && a.ClientStatus == "running" {
				n++
			}
		}
		return n == 2
	})
	lost := waitAllocs(ctx, t, c, id1, func(as []*api.Allocation) bool {
		return !slices.ContainsFunc(as, func(a *api.Allocation) bool { return a.ClientStatus != "lost" })
	})
	if len(lost) != 2 {
		t.Fatalf("%d lost allocs", len(lost))
	}
	// Eligible, it gets its system alloc back after the boot.
	waitNode(ctx, t, c, id1, func(n *api.Node) bool { return n.Status == api.NodeStatusReady })
	waitAllocs(ctx, t, c, id1, func(as []*api.Allocation) bool { return runningSystemAllocs(as) == 1 })
}

func TestRebootKeepSentinelAndServers(t *testing.T) {
	s, c := newTestSim(t, Config{Servers: 1, Clients: 1, KeepSentinelOnReboot: true})
	ctx := testCtx(t)
	if err := s.SetRebootRequired("client-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("server-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("nope"); err == nil {
		t.Fatal("unknown host must fail")
	}
	err := s.WaitFor(ctx, func(v *View) bool {
		a, _ := v.Host("client-1")
		b, _ := v.Host("server-1")
		return a.Boots == 1 && b.Boots == 1 && a.Up && b.Up
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.RebootRequired("client-1") {
		t.Fatal("KeepSentinelOnReboot: the sentinel must stay")
	}
	if err := s.ClearRebootRequired("client-1"); err != nil || s.RebootRequired("client-1") {
		t.Fatalf("clear: %v", err)
	}
	if err := s.ClearRebootRequired("client-1"); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
	// The cluster address still answers (stale: the only server may still be
	// electing itself leader after its reboot).
	if _, _, err := c.Nodes().List(&api.QueryOptions{AllowStale: true}); err != nil {
		t.Fatal(err)
	}
	// A server-only host has no node.
	if _, err := s.Node("server-1"); err == nil {
		t.Fatal("server-1 has no node")
	}
	resp, err := http.Get("http://" + mustHost(t, s, "server-1").Addr + "/sim/v1/hosts/server-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func mustHost(t *testing.T, s *Sim, name string) Host {
	t.Helper()
	h, ok := s.Host(name)
	if !ok {
		t.Fatalf("no host %s", name)
	}
	return h
}

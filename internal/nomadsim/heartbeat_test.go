package nomadsim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Timings with Nomad's ratios (MinHeartbeatTTL 10s, HeartbeatGrace 10s,
// FailoverHeartbeatTTL 5m), scaled down 100 times.
const (
	realTTL      = 100 * time.Millisecond
	realGrace    = 100 * time.Millisecond
	realFailover = 3 * time.Second
)

// allocOf returns the allocation of job in as (nil if none).
func allocOf(as []*api.Allocation, job string) *api.Allocation {
	for _, a := range as {
		if a.JobID == job && a.DesiredStatus == api.AllocDesiredStatusRun {
			return a
		}
	}
	return nil
}

// runningAlloc: as has a running allocation of job.
func runningAlloc(as []*api.Allocation, job string) bool {
	a := allocOf(as, job)
	return a != nil && a.ClientStatus == api.AllocClientStatusRunning
}

// nodeStatusEvents returns the node status changes of host in the event log.
func nodeStatusEvents(s *Sim, host string) []string {
	var out []string
	for _, e := range s.Events(0) {
		if e.Host != host {
			continue
		}
		switch e.Type {
		case EventNodeDown, EventNodeReady, EventNodeDisconnected, EventNodeInit, EventHostRebootStart, EventHostBoot:
			out = append(out, e.Type)
		}
	}
	return out
}

func nodeMessages(n *api.Node) []string {
	var out []string
	for _, e := range n.Events {
		out = append(out, e.Message)
	}
	return out
}

func eventTime(t *testing.T, s *Sim, host, typ string) time.Time {
	t.Helper()
	for _, e := range s.Events(0) {
		if e.Host == host && e.Type == typ {
			return e.Time
		}
	}
	t.Fatalf("no %s event for %s", typ, host)
	return time.Time{}
}

// A node whose system allocation has disconnect.lost_after goes disconnected, not
// down, when its host reboots for longer than the heartbeat TTL: that allocation
// becomes unknown, a system allocation without lost_after is left alone, a service
// allocation is lost and replaced. Back, the node goes initializing, the client
// reports the allocation running again (same allocation), then ready, and no
// re-registration event is added.
func TestRebootDisconnectedNodeReconnects(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, HeartbeatTTL: realTTL, HeartbeatGrace: realGrace, BootTime: 800 * time.Millisecond})
	ctx := testCtx(t)
	for _, j := range []JobSpec{
		{ID: "agent", Type: "system", DisconnectLostAfter: time.Minute},
		{ID: "exporter", Type: "system"},
		{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 2}}},
	} {
		if err := s.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	id1, id2 := nodeID(t, s, "client-1"), nodeID(t, s, "client-2")
	before := waitAllocs(ctx, t, c, id1, func(as []*api.Allocation) bool {
		return runningAlloc(as, "agent") && runningAlloc(as, "exporter") && runningAlloc(as, "web")
	})
	agent, exporter := allocOf(before, "agent"), allocOf(before, "exporter")
	if la := agent.Job.TaskGroups[0].Disconnect; la == nil || la.LostAfter == nil || *la.LostAfter != time.Minute {
		t.Fatalf("agent job disconnect block = %+v", la)
	}

	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	dis := waitNode(ctx, t, c, id1, func(n *api.Node) bool { return n.Status == api.NodeStatusDisconnected })
	if lastEvent(dis).Message != "Node heartbeat missed" {
		t.Fatalf("event %+v", lastEvent(dis))
	}
	// The host.reboot event is logged a moment after the client's last heartbeat
	// stood: allow a few milliseconds.
	if gap := eventTime(t, s, "client-1", EventNodeDisconnected).Sub(eventTime(t, s, "client-1", EventHostRebootStart)); gap < realGrace-5*time.Millisecond {
		t.Errorf("marked %s after the host went down: before TTL + grace", gap)
	}
	as := waitAllocs(ctx, t, c, id1, func(as []*api.Allocation) bool {
		a := allocOf(as, "agent")
		return a != nil && a.ClientStatus == api.AllocClientStatusUnknown
	})
	if a := allocOf(as, "exporter"); a == nil || a.ID != exporter.ID || a.ClientStatus != "running" {
		t.Fatalf("a system alloc without lost_after must be left alone: %+v", a)
	}
	for _, a := range as {
		if a.JobID == "web" && a.ClientStatus != "lost" {
			t.Fatalf("web alloc on a disconnected node: %s/%s", a.DesiredStatus, a.ClientStatus)
		}
	}
	waitAllocs(ctx, t, c, id2, func(as []*api.Allocation) bool {
		n := 0
		for _, a := range as {
			if a.JobID == "web" && a.ClientStatus == "running" {
				n++
			}
		}
		return n == 2
	})

	up := waitNode(ctx, t, c, id1, func(n *api.Node) bool { return n.Status == api.NodeStatusReady })
	msgs := nodeMessages(up)
	if slices.Contains(msgs, "Node re-registered") || slices.Contains(msgs, "Node reregistered by heartbeat") {
		t.Errorf("a disconnected node that reconnects is not re-registered: %v", msgs)
	}
	as, _, err := c.Nodes().Allocations(id1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := allocOf(as, "agent"); a == nil || a.ID != agent.ID || a.ClientStatus != "running" {
		t.Fatalf("the unknown alloc must reconnect as the same running alloc: %+v", a)
	}
	want := []string{EventHostRebootStart, EventNodeDisconnected, EventHostBoot, EventNodeInit, EventNodeReady}
	if got := nodeStatusEvents(s, "client-1"); !slices.Equal(got, want) {
		t.Fatalf("status changes %v; want %v", got, want)
	}
}

// Unknown allocations expire after lost_after: the next heartbeat check finds no
// pending reconnect and the node goes down; back, it is ready at once with
// "Node reregistered by heartbeat".
func TestDisconnectedNodeGoesDownWhenAllocsExpire(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, HeartbeatTTL: realTTL, HeartbeatGrace: realGrace, BootTime: 2 * time.Second})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system", DisconnectLostAfter: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	id := nodeID(t, s, "client-1")
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool { return runningAlloc(as, "agent") })
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusDisconnected })
	down := waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusDown })
	if lastEvent(down).Message != "Node heartbeat missed" {
		t.Fatalf("event %+v", lastEvent(down))
	}
	as, _, _ := c.Nodes().Allocations(id, nil)
	if len(as) != 1 || as[0].ClientStatus != "lost" || as[0].DesiredStatus != "stop" {
		t.Fatalf("expired alloc: %+v", as[0])
	}
	up := waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusReady })
	if lastEvent(up).Message != "Node reregistered by heartbeat" {
		t.Fatalf("event %+v", lastEvent(up))
	}
	want := []string{EventHostRebootStart, EventNodeDisconnected, EventNodeDown, EventHostBoot, EventNodeReady}
	if got := nodeStatusEvents(s, "client-1"); !slices.Equal(got, want) {
		t.Fatalf("status changes %v; want %v", got, want)
	}
}

// A reboot shorter than the heartbeat grace misses no heartbeat: the node stays
// ready throughout, no event is added, and the system allocation is the same one,
// running (the client restarts its task at boot).
func TestShortRebootMissesNoHeartbeat(t *testing.T) {
	ttl := 3 * realTTL
	s, c := newTestSim(t, Config{Clients: 1, HeartbeatTTL: ttl, HeartbeatGrace: ttl, BootTime: 50 * time.Millisecond})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	h := mustHost(t, s, "client-1")
	before := waitAllocs(ctx, t, c, h.NodeID, func(as []*api.Allocation) bool { return runningAlloc(as, "agent") })
	n0, _, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { hh, _ := v.Host("client-1"); return hh.Boots == 1 && hh.Up }); err != nil {
		t.Fatal(err)
	}
	// Follow the node past the latest deadline its last heartbeat before the
	// reboot could have set (2 TTL + grace): it never leaves ready.
	deadline := time.Now().Add(3*ttl + ttl)
	idx := n0.ModifyIndex
	for time.Now().Before(deadline) {
		n, m, err := c.Nodes().Info(h.NodeID, &api.QueryOptions{WaitIndex: idx, WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != api.NodeStatusReady || len(n.Events) != len(n0.Events) {
			t.Fatalf("node %s with events %v after a reboot shorter than the TTL", n.Status, nodeMessages(n))
		}
		idx = m.LastIndex
	}
	as, _, _ := c.Nodes().Allocations(h.NodeID, nil)
	if a := allocOf(as, "agent"); a == nil || a.ID != allocOf(before, "agent").ID || a.ClientStatus != "running" {
		t.Fatalf("system alloc after a short reboot: %+v", a)
	}
	if got := nodeStatusEvents(s, "client-1"); !slices.Equal(got, []string{EventHostRebootStart, EventHostBoot}) {
		t.Fatalf("status changes %v", got)
	}
	if h2 := mustHost(t, s, "client-1"); h2.BootID == h.BootID {
		t.Fatal("same boot ID after the reboot")
	}
}

// After a leader change every node gets the failover TTL: a reboot right after it
// (longer than the normal TTL, shorter than the failover TTL) misses no heartbeat.
// Once the client has heartbeated to the new leader, its TTL is the normal one
// again and the same reboot makes it down.
func TestFailoverHeartbeatTTLAfterLeaderChange(t *testing.T) {
	s, c := newTestSim(t, Config{Servers: 3, Clients: 1, HeartbeatTTL: realTTL, HeartbeatGrace: realGrace,
		FailoverHeartbeatTTL: realFailover, BootTime: 800 * time.Millisecond})
	ctx := testCtx(t)
	id := nodeID(t, s, "client-1")
	changeLeader := func() {
		t.Helper()
		if err := s.SetLeaderLost(true); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLeaderLost(false); err != nil {
			t.Fatal(err)
		}
	}
	rebootAndBack := func() {
		t.Helper()
		boots := mustHost(t, s, "client-1").Boots
		if err := s.Reboot("client-1"); err != nil {
			t.Fatal(err)
		}
		err := s.WaitFor(ctx, func(v *View) bool { h, _ := v.Host("client-1"); return h.Boots == boots+1 && h.Up })
		if err != nil {
			t.Fatal(err)
		}
		waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusReady })
	}

	changeLeader()
	rebootAndBack()
	if got := nodeStatusEvents(s, "client-1"); slices.Contains(got, EventNodeDown) {
		t.Fatalf("the node went down within the failover TTL: %v", got)
	}

	changeLeader()
	// Let the client heartbeat to the new leader a few times (each TTL).
	deadline := time.Now().Add(4 * realTTL)
	for time.Now().Before(deadline) {
		_, _, err := c.Nodes().Info(id, &api.QueryOptions{WaitIndex: s.Index(), WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
	}
	rebootAndBack()
	n, _, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(nodeMessages(n), "Node heartbeat missed") || lastEvent(n).Message != "Node reregistered by heartbeat" {
		t.Fatalf("after heartbeats to the new leader the normal TTL applies: %v", nodeMessages(n))
	}
}

// While there is no leader no node is marked; the next leader gives the silent
// node the failover TTL.
func TestNoLeaderMarksNoNode(t *testing.T) {
	s, c := newTestSim(t, Config{Servers: 1, Clients: 1, HeartbeatTTL: realTTL, HeartbeatGrace: realGrace,
		FailoverHeartbeatTTL: 6 * realTTL, BootTime: time.Hour})
	ctx := testCtx(t)
	id := nodeID(t, s, "client-1")
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	// Well past the normal deadline, the node is still ready (stale read).
	deadline := time.Now().Add(4*realTTL + realGrace)
	for time.Now().Before(deadline) {
		n, _, err := c.Nodes().Info(id, &api.QueryOptions{AllowStale: true, WaitIndex: s.Index(), WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != api.NodeStatusReady {
			t.Fatalf("node %s without a leader", n.Status)
		}
	}
	elected := time.Now()
	if err := s.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	waitNode(ctx, t, c, id, func(n *api.Node) bool { return n.Status == api.NodeStatusDown })
	if gap := eventTime(t, s, "client-1", EventNodeDown).Sub(elected); gap < 6*realTTL {
		t.Errorf("marked down %s after the election: before the failover TTL", gap)
	}
}

func TestDisconnectLostAfterSpec(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1})
	var spec JobSpec
	if err := json.Unmarshal([]byte(`{"id":"agent","type":"system","disconnect_lost_after":"1h"}`), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.DisconnectLostAfter != time.Hour {
		t.Fatalf("lost_after = %s", spec.DisconnectLostAfter)
	}
	b, _ := json.Marshal(spec)
	if !strings.Contains(string(b), `"disconnect_lost_after":"1h0m0s"`) {
		t.Fatalf("marshal: %s", b)
	}
	for _, bad := range []JobSpec{
		{ID: "web", DisconnectLostAfter: time.Hour},
		{ID: "sys", Type: "system", DisconnectLostAfter: -time.Second},
	} {
		if err := s.AddJob(bad); err == nil {
			t.Errorf("AddJob(%+v) accepted", bad)
		}
	}
}

// The first heartbeat of a client that booted comes within
// InitialHeartbeatStagger, a constant in Nomad (client.go
// initialHeartbeatStagger), not within the TTL the servers hand out, which
// grows with the node count: in a large cluster a rebooted node is down for its
// boot plus at most that stagger, not plus a rate-scaled TTL.
func TestFirstHeartbeatAfterBootWithinInitialStagger(t *testing.T) {
	const (
		clients = 8
		ttl     = 300 * time.Millisecond // rate-scaled: three times the stagger
		stagger = 20 * time.Millisecond
	)
	// A boot longer than the latest deadline (2 TTL + grace): every node is
	// marked down before its host is back.
	s, c := newTestSim(t, Config{Clients: clients, HeartbeatTTL: ttl, InitialHeartbeatStagger: stagger, BootTime: 2*ttl + 100*time.Millisecond})
	ctx := testCtx(t)
	for i := 1; i <= clients; i++ {
		if err := s.Reboot(fmt.Sprintf("client-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= clients; i++ {
		host := fmt.Sprintf("client-%d", i)
		waitNode(ctx, t, c, nodeID(t, s, host), func(n *api.Node) bool {
			return n.Status == api.NodeStatusReady && slices.Contains(nodeMessages(n), nodeReregisteredByHeartbeat)
		})
		// Each node's own boot and ready events, both taken under the
		// emulator's lock: only the stagger and the scheduling of the timer
		// lie between them. With the TTL as the stagger, the chance that all
		// eight come within 100ms is (1/3)^8.
		boot, ready := eventTime(t, s, host, EventHostBoot), eventTime(t, s, host, EventNodeReady)
		if gap := ready.Sub(boot); gap < 0 || gap > stagger+80*time.Millisecond {
			t.Errorf("%s ready %s after its boot, want within the initial stagger (%s)", host, gap, stagger)
		}
		if got := nodeStatusEvents(s, host); !slices.Equal(got, []string{EventHostRebootStart, EventNodeDown, EventHostBoot, EventNodeReady}) {
			t.Errorf("%s status changes %v", host, got)
		}
	}
}

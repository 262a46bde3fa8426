package nomadsim

import (
	"time"

	"github.com/hashicorp/nomad/api"
)

// Heartbeats and node status, as Nomad 1.10.5 handles them (the same in 1.9.7 and
// 1.11.3 except where noted in docs/emulator.md):
//
//   - The leader keeps one timer per node (nomad/heartbeat.go
//     resetHeartbeatTimer): every heartbeat or registration resets it to a TTL of
//     MinHeartbeatTTL plus a random stagger of up to as much again
//     (helper.RandomStagger), plus HeartbeatGrace. The client heartbeats again
//     after the TTL it was given (client/client.go registerAndHeartbeat).
//   - A new leader gives every node that is not down the failover TTL
//     (heartbeat.go initializeHeartbeatTimers); a leader that steps down clears
//     its timers (clearAllHeartbeatTimers), and without a leader no node is
//     marked (invalidateHeartbeat returns when not leader).
//   - When a timer fires (invalidateHeartbeat), the node becomes "disconnected"
//     if one of its allocations has a disconnect.lost_after, wants to run and has
//     not expired (disconnectState), otherwise "down"; either way the node gets
//     the event "Node heartbeat missed". A disconnected node keeps a timer
//     (node_endpoint.go UpdateStatus resets it for every status but down), so it
//     is checked again, and goes down once its unknown allocations expired.
//   - The scheduler then marks the allocations of a down node lost; on a
//     disconnected node a running system allocation with lost_after becomes
//     "unknown", other system allocations are left as they are, and service and
//     batch allocations are lost (scheduler/system_util.go
//     diffSystemAllocsForNode, scheduler/reconcile_util.go filterByTainted).
//   - A client that boots registers (Node.Register keeps the stored status:
//     node_endpoint.go, since 1.5), which resets its timer, and restarts the
//     tasks of the system allocations it restores from its state DB at once
//     (client/allocrunner/taskrunner/task_runner.go Restore). Its first
//     heartbeat comes after a random stagger of up to 10s, the minimum TTL
//     but a constant (client.go initialHeartbeatStagger). Node.UpdateStatus then moves
//     down → ready with the event "Node reregistered by heartbeat",
//     disconnected → initializing, and initializing → ready once the client
//     has updated its allocations since it missed its heartbeat
//     (LastAllocUpdateIndex > LastMissedHeartbeatIndex). Node.UpdateAlloc is
//     refused while the node is down or disconnected.
//
// A host that comes back before its timer fires misses nothing: its node stays
// ready and its allocations keep running (their tasks restarted by the client).

// Event types for node status changes, in addition to node.down and node.ready.
const (
	EventNodeDisconnected = "node.disconnected"
	EventNodeInit         = "node.initializing"
	// EventAllocUnknown: an allocation on a disconnected node became unknown.
	EventAllocUnknown = "alloc.unknown"
)

const (
	// nodeReregisteredByHeartbeat is node_endpoint.go NodeHeartbeatEventReregistered,
	// added by Node.UpdateStatus when a down node heartbeats again.
	nodeReregisteredByHeartbeat = "Node reregistered by heartbeat"
	// allocUnknownDesc and allocLostDesc are scheduler/generic_sched.go
	// allocUnknown and allocLost.
	allocUnknownDesc = "alloc is unknown since its node is disconnected"
	allocLostDesc    = "alloc is lost since its node is down"
)

// heartbeats is the leader's heartbeat bookkeeping.
type heartbeats struct {
	nodes        map[string]*nodeHeartbeat // by node ID
	unknownSince map[string]time.Time      // by alloc ID: when it became unknown (AllocStates)
}

type nodeHeartbeat struct {
	last     time.Time     // the last heartbeat (or registration) the servers accepted
	ttl      time.Duration // the TTL answered then: the client heartbeats again after it
	deadline time.Time     // when the leader's timer for the node fires
	gen      uint64        // bumped whenever the timer is reset or cleared

	lastMissedIndex      uint64 // structs.Node.LastMissedHeartbeatIndex
	lastAllocUpdateIndex uint64 // structs.Node.LastAllocUpdateIndex
}

func (c *clusterState) heartbeatOf(nodeID string) *nodeHeartbeat {
	if c.hb.nodes == nil {
		c.hb.nodes = map[string]*nodeHeartbeat{}
		c.hb.unknownSince = map[string]time.Time{}
	}
	hb := c.hb.nodes[nodeID]
	if hb == nil {
		hb = &nodeHeartbeat{}
		c.hb.nodes[nodeID] = hb
	}
	return hb
}

// acceptHeartbeatLocked is resetHeartbeatTimer for a heartbeat received at t: the
// TTL is MinHeartbeatTTL (RateScaledInterval at the emulator's node counts) plus
// RandomStagger of it, and the timer fires after TTL + HeartbeatGrace.
func (c *clusterState) acceptHeartbeatLocked(s *Sim, sn *simNode, t time.Time) {
	hb := c.heartbeatOf(sn.node.ID)
	ttl := s.cfg.HeartbeatTTL
	if ttl > 0 {
		ttl += time.Duration(s.rng.Int64N(int64(ttl)))
	}
	hb.last, hb.ttl = t, ttl
	hb.deadline = t.Add(ttl + s.cfg.HeartbeatGrace)
}

// catchUpHeartbeatsLocked replays the heartbeats the client of a ready node on a
// host that is up has sent until now, one every TTL (computed lazily: nothing
// depends on them until the host goes silent or the leader changes).
func (c *clusterState) catchUpHeartbeatsLocked(s *Sim, sn *simNode, now time.Time) {
	hb := c.heartbeatOf(sn.node.ID)
	if !sn.host.Up || sn.node.Status != api.NodeStatusReady || hb.ttl <= 0 {
		return
	}
	for next := hb.last.Add(hb.ttl); !next.After(now); next = hb.last.Add(hb.ttl) {
		c.acceptHeartbeatLocked(s, sn, next)
	}
}

// armHeartbeatTimerLocked (re)starts the leader's timer for the node at its
// deadline.
func (c *clusterState) armHeartbeatTimerLocked(s *Sim, sn *simNode) {
	hb := c.heartbeatOf(sn.node.ID)
	hb.gen++
	gen := hb.gen
	s.after(time.Until(hb.deadline), func() {
		if hb.gen == gen {
			c.heartbeatExpiredLocked(s, sn)
		}
	})
}

// clientGoesSilentLocked: the host of the node goes down (call it while the host
// is still up): its client's last heartbeat stands, and the leader's timer runs
// out at the deadline that heartbeat set, unless the client registers first.
func (c *clusterState) clientGoesSilentLocked(s *Sim, h *Host) {
	sn, ok := c.nodes[h.NodeID]
	if !ok {
		return
	}
	c.catchUpHeartbeatsLocked(s, sn, time.Now())
	c.armHeartbeatTimerLocked(s, sn)
}

// heartbeatExpiredLocked is invalidateHeartbeat: the node becomes disconnected or
// down with the event "Node heartbeat missed".
func (c *clusterState) heartbeatExpiredLocked(s *Sim, sn *simNode) {
	if s.servers.Leader() == nil || sn.host.Up || sn.node.Status == api.NodeStatusDown {
		// Not the leader: nothing is marked (a new leader starts new timers).
		// A host that is up registered again, which reset the timer. A down
		// node has no timer: Register and initializeHeartbeatTimers start none
		// for a node in a terminal status, and UpdateStatus(down) stops it.
		return
	}
	now := time.Now()
	status := api.NodeStatusDown
	if can, pending := c.disconnectStateLocked(sn, now); can && pending {
		status = api.NodeStatusDisconnected
	}
	c.setNodeStatusLocked(s, sn, status, nodeHeartbeatMissed)
	if status == api.NodeStatusDown {
		c.nodeDownAllocsLocked(s, sn.node.ID)
	} else {
		c.nodeDisconnectedAllocsLocked(s, sn, now)
		// Node.UpdateStatus resets the timer of every node that is not down.
		c.acceptHeartbeatLocked(s, sn, now)
		c.armHeartbeatTimerLocked(s, sn)
	}
	c.scheduleLocked(s, now)
}

// disconnectStateLocked is heartbeat.go disconnectState: whether one of the node's
// allocations has a disconnect.lost_after, and whether such an allocation wants to
// run and has not expired. A node that is down or initializing cannot disconnect.
func (c *clusterState) disconnectStateLocked(sn *simNode, now time.Time) (can, pending bool) {
	if sn.node.Status == api.NodeStatusDown || sn.node.Status == api.NodeStatusInit {
		return false, false
	}
	for _, id := range c.byNode[sn.node.ID] {
		sa := c.allocs[id]
		if sa.a.NodeID != sn.node.ID || sa.job.spec.DisconnectLostAfter <= 0 {
			continue
		}
		can = true
		if sa.a.DesiredStatus == api.AllocDesiredStatusRun && !c.allocExpiredLocked(sa, now) {
			return true, true
		}
	}
	return can, false
}

// allocExpiredLocked is Allocation.Expired: unknown for longer than lost_after.
func (c *clusterState) allocExpiredLocked(sa *simAlloc, now time.Time) bool {
	since, ok := c.hb.unknownSince[sa.a.ID]
	if !ok || sa.a.ClientStatus != api.AllocClientStatusUnknown {
		return false
	}
	return !since.Add(sa.job.spec.DisconnectLostAfter).After(now)
}

// setNodeStatusLocked is state_store.go updateNodeStatusTxn: the status (and an
// event, if any) in one write; LastMissedHeartbeatIndex is set when the node
// becomes unresponsive and cleared when it becomes ready.
func (c *clusterState) setNodeStatusLocked(s *Sim, sn *simNode, status, event string) {
	idx := s.bumpLocked()
	n := sn.node
	old := n.Status
	if event != "" {
		addNodeEvent(n, "Cluster", event, nil, idx)
	}
	n.Status = status
	n.StatusUpdatedAt = time.Now().Unix()
	hb := c.heartbeatOf(n.ID)
	unresponsive := func(st string) bool {
		return st == api.NodeStatusDown || st == api.NodeStatusDisconnected
	}
	if !unresponsive(old) && unresponsive(status) {
		hb.lastMissedIndex = idx
	} else if old != api.NodeStatusReady && status == api.NodeStatusReady {
		hb.lastMissedIndex = 0
	}
	c.touchNodeLocked(n, idx, eventNodeStatus)
	if old == status {
		return
	}
	typ := map[string]string{
		api.NodeStatusDown: EventNodeDown, api.NodeStatusReady: EventNodeReady,
		api.NodeStatusDisconnected: EventNodeDisconnected, api.NodeStatusInit: EventNodeInit,
	}[status]
	s.eventLocked(Event{Type: typ, Host: sn.host.Name, NodeID: n.ID, Details: map[string]string{"previous": old}})
}

// nodeDisconnectedAllocsLocked is the scheduler's answer to a disconnected node: a
// running system allocation with lost_after becomes unknown (it keeps
// DesiredStatus run and is not replaced), other system allocations are ignored,
// and service and batch allocations are lost and replaced elsewhere (the emulator
// models lost_after for system jobs only).
func (c *clusterState) nodeDisconnectedAllocsLocked(s *Sim, sn *simNode, now time.Time) {
	defer c.endBatch()
	for _, id := range c.byNode[sn.node.ID] {
		sa := c.allocs[id]
		a := sa.a
		if a.NodeID != sn.node.ID || allocClientTerminal(a) || a.ClientStatus == api.AllocClientStatusUnknown {
			continue
		}
		if *a.Job.Type == api.JobTypeSystem {
			if sa.job.spec.DisconnectLostAfter > 0 && a.ClientStatus == api.AllocClientStatusRunning &&
				a.DesiredStatus == api.AllocDesiredStatusRun {
				a.ClientStatus = api.AllocClientStatusUnknown
				a.ClientDescription = allocUnknownDesc
				c.hb.unknownSince[a.ID] = now
				c.touchAllocLocked(s, a)
				c.allocEventLocked(s, EventAllocUnknown, a, map[string]string{"reason": "node disconnected"})
			}
			continue
		}
		c.loseAllocLocked(s, sa, "node disconnected")
	}
}

// loseAllocLocked marks an allocation lost (DesiredStatus stop, ClientStatus lost).
func (c *clusterState) loseAllocLocked(s *Sim, sa *simAlloc, reason string) {
	a := sa.a
	a.DesiredStatus = api.AllocDesiredStatusStop
	a.DesiredDescription = allocLostDesc
	a.ClientStatus = api.AllocClientStatusLost
	a.ClientDescription = allocLostDesc
	delete(c.hb.unknownSince, a.ID)
	c.touchAllocLocked(s, a)
	c.allocEventLocked(s, EventAllocStop, a, map[string]string{"reason": reason})
}

// clientRegisteredLocked is the client of h registering after its host booted
// (client.go registerNode → Node.Register): the stored status stays (only
// UpdateStatus changes it), the leader's timer is reset, and the first heartbeat
// follows after a random stagger of up to Config.InitialHeartbeatStagger
// (client.go registerAndHeartbeat).
func (c *clusterState) clientRegisteredLocked(s *Sim, h *Host, sn *simNode) {
	now := time.Now()
	hb := c.heartbeatOf(sn.node.ID)
	hb.gen++ // the timer armed when the host went down no longer applies
	if s.servers.Leader() != nil && sn.node.Status != api.NodeStatusDown {
		c.acceptHeartbeatLocked(s, sn, now)
	}
	gen := s.cluster.rebootGen[h.Name]
	stagger := time.Duration(0)
	if s.cfg.InitialHeartbeatStagger > 0 {
		stagger = time.Duration(s.rng.Int64N(int64(s.cfg.InitialHeartbeatStagger)))
	}
	s.after(stagger, func() { c.clientHeartbeatLocked(s, h, sn, gen) })
}

// clientHeartbeatLocked is one Node.UpdateStatus(ready) from the client of h in
// its boot gen, while its node is not ready yet; once it is, its heartbeats are
// replayed lazily (catchUpHeartbeatsLocked).
func (c *clusterState) clientHeartbeatLocked(s *Sim, h *Host, sn *simNode, gen int) {
	if c.rebootGen[h.Name] != gen || !h.Up {
		return
	}
	if s.servers.Leader() == nil {
		// No leader to take it: the client retries (getHeartbeatRetryIntv).
		s.after(s.cfg.HeartbeatTTL, func() { c.clientHeartbeatLocked(s, h, sn, gen) })
		return
	}
	now := time.Now()
	hb := c.heartbeatOf(sn.node.ID)
	switch sn.node.Status {
	case api.NodeStatusDown:
		c.setNodeStatusLocked(s, sn, api.NodeStatusReady, nodeReregisteredByHeartbeat)
	case api.NodeStatusDisconnected:
		c.setNodeStatusLocked(s, sn, api.NodeStatusInit, "")
		// The client's alloc updates, refused while the node was
		// disconnected, now go through (Node.UpdateAlloc).
		c.clientAllocSyncLocked(s, sn, now)
	case api.NodeStatusInit:
		if !c.hasLiveAllocsLocked(sn.node.ID) || hb.lastAllocUpdateIndex > hb.lastMissedIndex {
			c.setNodeStatusLocked(s, sn, api.NodeStatusReady, "")
		}
	}
	c.acceptHeartbeatLocked(s, sn, now)
	if sn.node.Status != api.NodeStatusReady {
		s.after(hb.ttl, func() { c.clientHeartbeatLocked(s, h, sn, gen) })
		return
	}
	c.scheduleLocked(s, now)
}

// hasLiveAllocsLocked: the node has allocations that are not terminal
// (state AllocsByNodeTerminal(false)).
func (c *clusterState) hasLiveAllocsLocked(nodeID string) bool {
	for _, id := range c.byNode[nodeID] {
		if sa := c.allocs[id]; sa.a.NodeID == nodeID && !allocTerminal(sa.a) {
			return true
		}
	}
	return false
}

// clientAllocSyncLocked is the client reporting the allocations it restored after
// its boot (Node.UpdateAlloc): an unknown allocation is running again (its task was
// restarted), or lost if it expired meanwhile (the reconciler's "expiring").
func (c *clusterState) clientAllocSyncLocked(s *Sim, sn *simNode, now time.Time) {
	defer c.endBatch()
	sent := false
	for _, id := range c.byNode[sn.node.ID] {
		sa := c.allocs[id]
		a := sa.a
		if a.NodeID != sn.node.ID || a.DesiredStatus != api.AllocDesiredStatusRun || allocClientTerminal(a) {
			continue
		}
		sent = true
		if a.ClientStatus != api.AllocClientStatusUnknown {
			continue
		}
		if c.allocExpiredLocked(sa, now) {
			c.loseAllocLocked(s, sa, "expired while disconnected")
			continue
		}
		a.ClientStatus = api.AllocClientStatusRunning
		a.ClientDescription = "Tasks are running"
		delete(c.hb.unknownSince, a.ID)
		c.touchAllocLocked(s, a)
		c.allocEventLocked(s, EventAllocStart, a, map[string]string{"reason": "reconnected"})
	}
	if sent {
		c.heartbeatOf(sn.node.ID).lastAllocUpdateIndex = c.writeLocked(s)
	}
}

// leaderElectedLocked is initializeHeartbeatTimers: every node that is not down
// gets a new timer; after a leader change (stretch) its TTL is
// FailoverHeartbeatTTL, when set. The first leader of the cluster keeps the TTLs
// the nodes registered with.
func (c *clusterState) leaderElectedLocked(s *Sim, stretch bool) {
	now := time.Now()
	for _, sn := range c.sortedNodesLocked(s) {
		if sn.node.Status == api.NodeStatusDown {
			continue
		}
		c.catchUpHeartbeatsLocked(s, sn, now)
		if stretch && s.cfg.FailoverHeartbeatTTL > 0 {
			c.heartbeatOf(sn.node.ID).deadline = now.Add(s.cfg.FailoverHeartbeatTTL)
		}
		if !sn.host.Up {
			c.armHeartbeatTimerLocked(s, sn)
		}
	}
}

// leaderLostLocked is clearAllHeartbeatTimers: without a leader no node is marked.
func (c *clusterState) leaderLostLocked(s *Sim) {
	now := time.Now()
	for _, sn := range c.nodes {
		c.catchUpHeartbeatsLocked(s, sn, now)
		c.heartbeatOf(sn.node.ID).gen++
	}
}

// ClientAlloc returns the ID of the allocation of job that the client on nodeID
// runs, if any: it wants to run and is running, or unknown (a client that boots
// restarts the tasks of the system allocations it restores before it reaches the
// servers). Whether the host is up is the caller's concern.
func (v *View) ClientAlloc(nodeID, job string) (string, bool) {
	for _, id := range v.s.cluster.allocOrder {
		a := v.s.cluster.allocs[id].a
		if a.NodeID == nodeID && a.JobID == job && a.DesiredStatus == api.AllocDesiredStatusRun &&
			(a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusUnknown) {
			return a.ID, true
		}
	}
	return "", false
}

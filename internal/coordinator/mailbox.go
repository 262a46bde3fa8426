package coordinator

import (
	"context"
	"maps"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watched"
)

// Who owns what. The pass goroutine (Run's loop, or whoever calls
// ReconcileOnce) alone owns the coordinator's state between passes: the caches
// of what Nomad said (the control state, the node groups, the heartbeat
// events and the capacity of nodes, by ModifyIndex), the stored policy's last
// read, the memberships, the metrics' last export. They are plain fields, used
// with no lock. The watches run on goroutines of their own, as the agent's do
// (internal/agent: its watches hand their newest answer to its one event
// loop): each only puts its newest answer in the mailbox, and the pass takes
// them all at its start (takeMail) and decides from what it took. A change
// that comes during a pass pokes the next one, which takes it.
//
// Two locks are left. The mailbox's, between the watches and the pass. And
// Coordinator.mu, for what the steps of a pass that run side by side write:
// the plans (the parallel plan writes, apply.go), whether the pass
// changed something and when to look again; and what callers read while Run
// runs (Ignored; the overruns are loopmetrics.Passes'). The capacity gate's
// allocation reads, side by side, are kept under package allocsource's own
// lock.

// answers are the newest answers of the watches.
type answers struct {
	hosts    watched.Value[store.HostList]
	control  watched.Value[struct{}] // the control variable
	requests watched.Value[struct{}] // the per-host control variables
	policy   watched.Value[struct{}]
	halts    watched.Value[struct{}] // the failure budgets' halt state (caches.go readHalts)
	agentJob watched.Value[hostcheck.AgentAllocs]
	// nodes: the node list (nil while not live), from the node watch or the
	// event stream's follower (nodes.go).
	nodes watched.Value[[]*api.NodeListStub]
	// nodeWatch: how the nodes are followed (nodes.go followNodes).
	nodeWatch nodestream.State
	// allocs: the allocations of each node whose allocation watch answered
	// (package rejoinwatch), until it ends.
	allocs map[string][]*api.Allocation
	// nodeEvents: the heartbeat indexes of the nodes the node follower saw in
	// full since the last pass took them (nodes.go nodeSink.NodesWritten),
	// each at the node's ModifyIndex; the pass keeps them (caches.go
	// streamed), and the mailbox starts afresh.
	nodeEvents byindex.Cache[heartbeatIndexes]
	// nodeCapacity: the capacity of the same nodes (capacity.NodeOf), for the
	// capacity gate, taken and started afresh with nodeEvents.
	nodeCapacity byindex.Cache[capacity.Node]
	// hostsUntaken: the host watch answered a change that no pass took yet
	// (its next list waits for one: caches.go).
	hostsUntaken bool
}

// mailbox is where the watches leave their newest answers for the pass.
type mailbox struct {
	watched.Box[answers]
}

// start begins a term of the watches: nothing answered before counts.
func (m *mailbox) start(term context.Context) {
	m.Start(term, func(a *answers) {
		a.hosts.Failed()
		a.control.Failed()
		a.requests.Failed()
		a.policy.Failed()
		a.halts.Failed()
		a.agentJob.Failed()
		a.nodes.Failed()
		a.allocs, a.nodeEvents, a.nodeCapacity = nil, byindex.Cache[heartbeatIndexes]{}, byindex.Cache[capacity.Node]{}
		a.hostsUntaken = false
	})
}

// take returns the watches' newest answers, as a pass starts from them, and
// marks the host watch's list as taken.
func (m *mailbox) take() answers {
	return m.Take(func(mine *answers, ended bool) answers {
		mine.hostsUntaken = false
		a := *mine
		// A copy, even of an empty map: the watches go on writing to theirs.
		a.allocs = maps.Clone(mine.allocs)
		// The pass's now: the follower starts new ones.
		mine.nodeEvents, mine.nodeCapacity = byindex.Cache[heartbeatIndexes]{}, byindex.Cache[capacity.Node]{}
		if ended {
			// The term ended: its watches stopped answering.
			for _, w := range []*watched.Value[struct{}]{&a.control, &a.requests, &a.policy, &a.halts} {
				w.Live = false
			}
			a.hosts.Live, a.agentJob.Live, a.nodes.Live = false, false, false
			a.nodes.Val, a.allocs = nil, nil
		}
		return a
	})
}

// update runs fn on the answers, for a watch's goroutine.
func (m *mailbox) update(fn func(a *answers)) { m.Update(fn) }

// hostsAnswered records an answer of the host watch at index with its list;
// changed: its index moved, and the watch lists again only once a pass took
// this list (hostsTaken).
func (m *mailbox) hostsAnswered(index uint64, list store.HostList, changed bool) {
	m.Update(func(a *answers) {
		a.hosts.Answered(index, list, changed)
		a.hostsUntaken = a.hostsUntaken || changed
	})
}

// hostsFailed records a failure of the host watch: its next query, a retry,
// waits for no pass.
func (m *mailbox) hostsFailed() {
	m.Update(func(a *answers) {
		a.hosts.Failed()
		a.hostsUntaken = false
	})
}

// hostsTaken waits until a pass took the host watch's last list answered
// after a change (at once when none waits to be taken); false when ctx ended
// first.
func (m *mailbox) hostsTaken(ctx context.Context) bool {
	return m.Wait(ctx, func(a *answers, _ bool) bool { return !a.hostsUntaken }, 0)
}

// setNodes keeps the node list answered at index (nil: forget it, the watch
// failed), unless it is older than the one kept (an answer that took longer
// than the next one).
func (m *mailbox) setNodes(list []*api.NodeListStub, index uint64) {
	m.Update(func(a *answers) {
		switch n := &a.nodes; {
		case list == nil:
			n.Failed()
		case n.Val != nil && index < n.Index:
		default:
			n.Answered(index, list, true)
		}
	})
}

// nodesAt reports whether the node list kept was answered at index.
func (m *mailbox) nodesAt(index uint64) (at bool) {
	m.Read(func(a *answers, _ bool) { at = a.nodes.Val != nil && a.nodes.Index == index })
	return at
}

// caughtUp returns the node list once one at index wrote or later is kept,
// waiting up to wait; false when there is no list to wait for (or its term
// ended), or it did not catch up in time.
func (m *mailbox) caughtUp(ctx context.Context, wrote uint64, wait time.Duration) (n watched.Value[[]*api.NodeListStub], ok bool) {
	m.Wait(ctx, func(a *answers, ended bool) bool {
		if a.nodes.Val == nil || ended {
			ok = false // nothing to wait for
			return true
		}
		n, ok = a.nodes, a.nodes.Index >= wrote
		return ok
	}, wait)
	if !ok {
		return watched.Value[[]*api.NodeListStub]{}, false
	}
	return n, true
}

// SetAllocs keeps the allocations the watch of nodeID read (nil: forget
// them, the watch failed or ended).
func (m *mailbox) SetAllocs(nodeID string, allocs []*api.Allocation) {
	m.Update(func(a *answers) {
		if allocs == nil {
			delete(a.allocs, nodeID)
			return
		}
		if a.allocs == nil {
			a.allocs = map[string][]*api.Allocation{}
		}
		a.allocs[nodeID] = allocs
	})
}

// takeMail starts a pass: it takes the watches' newest answers, and starts
// the pass's allocation source from those of the allocation watches.
func (c *Coordinator) takeMail() {
	c.seen = c.mail.take()
	c.allocs.NewPass(c.seen.allocs)
	c.streamed.PutAll(c.seen.nodeEvents)
	c.capacity.Streamed(c.seen.nodeCapacity)
}

package coordinator

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/byindex"
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
// runs (Overruns, Ignored). The capacity gate's
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
}

// mailbox is where the watches leave their newest answers for the pass.
type mailbox struct {
	// mu: the watches write from their goroutines; the pass takes.
	mu sync.Mutex
	// term: the context of the watches (nil: none, as in tests that answer
	// for a watch): once it ends, no watch is live.
	term context.Context
	a    answers
	// hostsTaken is closed when a pass takes the host watch's list answered
	// after a change (nil: none waits to be taken; caches.go).
	hostsTaken chan struct{}
	// nodesKept is closed and replaced whenever a node list is kept
	// (caughtUp).
	nodesKept chan struct{}
}

// start begins a term of the watches: nothing answered before counts.
func (m *mailbox) start(term context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.term = term
	a := &m.a
	a.hosts.Failed()
	a.control.Failed()
	a.requests.Failed()
	a.policy.Failed()
	a.halts.Failed()
	a.agentJob.Failed()
	a.nodes.Failed()
	a.allocs, a.nodeEvents = nil, byindex.Cache[heartbeatIndexes]{}
	m.takeHostsLocked()
	m.nodesKeptLocked()
}

// take returns the watches' newest answers, as a pass starts from them, and
// marks the host watch's list as taken.
func (m *mailbox) take() answers {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.takeHostsLocked()
	a := m.a
	// A copy, even of an empty map: the watches go on writing to theirs.
	a.allocs = maps.Clone(m.a.allocs)
	m.a.nodeEvents = byindex.Cache[heartbeatIndexes]{} // the pass's now: the follower starts a new one
	if m.term != nil && m.term.Err() != nil {
		// The term ended: its watches stopped answering.
		for _, w := range []*watched.Value[struct{}]{&a.control, &a.requests, &a.policy, &a.halts} {
			w.Live = false
		}
		a.hosts.Live, a.agentJob.Live, a.nodes.Live = false, false, false
		a.nodes.Val, a.allocs = nil, nil
	}
	return a
}

// update runs fn on the answers, for a watch's goroutine.
func (m *mailbox) update(fn func(a *answers)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(&m.a)
}

// takeHostsLocked marks the host watch's last list as taken (m.mu held).
func (m *mailbox) takeHostsLocked() {
	if m.hostsTaken != nil {
		close(m.hostsTaken)
		m.hostsTaken = nil
	}
}

// hostsAnswered records an answer of the host watch at index with its list;
// changed: its index moved, and the watch lists again only once a pass took
// this list (untakenHosts).
func (m *mailbox) hostsAnswered(index uint64, list store.HostList, changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.a.hosts.Answered(index, list, changed)
	if changed && m.hostsTaken == nil {
		m.hostsTaken = make(chan struct{})
	}
}

// hostsFailed records a failure of the host watch: its next query, a retry,
// waits for no pass.
func (m *mailbox) hostsFailed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.a.hosts.Failed()
	m.takeHostsLocked()
}

// untakenHosts returns a channel closed once a pass takes the host watch's
// last list after a change (nil: it has been taken, or no change waits).
func (m *mailbox) untakenHosts() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hostsTaken
}

// setNodes keeps the node list answered at index (nil: forget it, the watch
// failed), unless it is older than the one kept (an answer that took longer
// than the next one).
func (m *mailbox) setNodes(list []*api.NodeListStub, index uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &m.a.nodes
	switch {
	case list == nil:
		n.Failed()
	case n.Val != nil && index < n.Index:
		return
	default:
		n.Answered(index, list, true)
	}
	m.nodesKeptLocked()
}

// nodesAt reports whether the node list kept was answered at index.
func (m *mailbox) nodesAt(index uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.a.nodes.Val != nil && m.a.nodes.Index == index
}

// nodesKeptLocked wakes the passes waiting for a node list (m.mu held).
func (m *mailbox) nodesKeptLocked() {
	if m.nodesKept != nil {
		close(m.nodesKept)
		m.nodesKept = nil
	}
}

// caughtUp returns the node list once one at index wrote or later is kept,
// waiting up to wait; false when there is no list to wait for (or its term
// ended), or it did not catch up in time.
func (m *mailbox) caughtUp(ctx context.Context, wrote uint64, wait time.Duration) (watched.Value[[]*api.NodeListStub], bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		m.mu.Lock()
		n := m.a.nodes
		if n.Val == nil || m.term != nil && m.term.Err() != nil {
			m.mu.Unlock()
			return watched.Value[[]*api.NodeListStub]{}, false
		}
		if n.Index >= wrote {
			m.mu.Unlock()
			return n, true
		}
		if m.nodesKept == nil {
			m.nodesKept = make(chan struct{})
		}
		kept := m.nodesKept
		m.mu.Unlock()
		select {
		case <-kept:
		case <-t.C:
			return watched.Value[[]*api.NodeListStub]{}, false
		case <-ctx.Done():
			return watched.Value[[]*api.NodeListStub]{}, false
		}
	}
}

// SetAllocs keeps the allocations the watch of nodeID read (nil: forget
// them, the watch failed or ended).
func (m *mailbox) SetAllocs(nodeID string, allocs []*api.Allocation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if allocs == nil {
		delete(m.a.allocs, nodeID)
		return
	}
	if m.a.allocs == nil {
		m.a.allocs = map[string][]*api.Allocation{}
	}
	m.a.allocs[nodeID] = allocs
}

// takeMail starts a pass: it takes the watches' newest answers, and starts
// the pass's allocation source from those of the allocation watches.
func (c *Coordinator) takeMail() {
	c.seen = c.mail.take()
	c.allocs.NewPass(c.seen.allocs)
	c.streamed.PutAll(c.seen.nodeEvents)
}

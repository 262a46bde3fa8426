package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/heartbeatread"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/optout"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// One node list per pass. The node watch's blocking query already reads the
// whole list at every change: a pass takes that list instead of reading it
// again (or reads it itself when the watch has no answer, as outside Run), unless it is older than the coordinator's own last node write (a drain,
// an eligibility change: the next pass must see it, or it would issue the drain
// again). And a group's members are the nodes its filter matches as Nomad
// evaluates it, asked again only for the nodes that changed (package
// nodegroups). So a pass over an idle cluster reads no node at all, and one during a rollout
// reads a few nodes per group instead of every node once plus once per group.

// writeIndexNodes records the index of every node write, so that the next pass
// does not take a node list older than it (nodeList).
type writeIndexNodes struct {
	NodesAPI
	atLeast *atomic.Uint64
}

// written records the index of a node write of ours.
func (w writeIndexNodes) written(index uint64) { raiseTo(w.atLeast, index) }

// raiseTo makes v index if it is less.
func raiseTo(v *atomic.Uint64, index uint64) {
	for {
		old := v.Load()
		if index <= old || v.CompareAndSwap(old, index) {
			return
		}
	}
}

func (w writeIndexNodes) UpdateDrainOpts(nodeID string, opts *api.DrainOptions, q *api.WriteOptions) (*api.NodeDrainUpdateResponse, error) {
	r, err := w.NodesAPI.UpdateDrainOpts(nodeID, opts, q)
	if err == nil && r != nil {
		w.written(max(r.NodeModifyIndex, r.LastIndex))
	}
	return r, err
}

func (w writeIndexNodes) ToggleEligibility(nodeID string, eligible bool, q *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error) {
	r, err := w.NodesAPI.ToggleEligibility(nodeID, eligible, q)
	if err == nil && r != nil {
		w.written(max(r.NodeModifyIndex, r.LastIndex))
	}
	return r, err
}

// nodeList returns the node list the watch answered, if it shows every node
// write of ours and is no older than a list a pass read itself (a watch's
// first answer may be older than the list the pass before read meanwhile, and
// show nodes as they were before): as the pass took it, else once the watch
// catches up, waiting up to catchUpWait (nodes.go); nil when it does not.
func (c *Coordinator) nodeList(ctx context.Context) []*api.NodeListStub {
	least := c.nodesAtLeast.Load()
	if w := c.seen.nodes; w.Live && w.Index >= least {
		return w.Val
	}
	wait := catchUpWait
	if !c.suspected.IsZero() && c.now().Sub(c.suspected) < nodestream.CatchUp {
		// A pass before found the stream behind: the follower decides
		// within CatchUp whether it is silent, and then reads the whole list
		// itself (blocking.go). Waiting for that spares a list per pass.
		wait += nodestream.CatchUp
	}
	if w, ok := c.mail.caughtUp(ctx, least, wait); ok {
		c.seen.nodes, c.suspected = w, time.Time{}
		return w.Val
	}
	if c.nodeFollower != nil && least > 0 {
		// The stream did not show a write of ours: it may be silent.
		c.nodeFollower.Suspect()
		if c.suspected.IsZero() {
			c.suspected = c.now()
		}
	}
	return nil
}

// readNodes returns every node, and the group of each (the first group whose
// filter matches it, as Nomad evaluates it).
func (c *Coordinator) readNodes(ctx context.Context) (map[string]*api.NodeListStub, map[string]string, error) {
	list := c.nodeList(ctx)
	if list == nil {
		l, meta, err := c.opt.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, nil, fmt.Errorf("list nodes: %w", err)
		}
		// Not kept for the next pass: only the watch knows when it
		// changes. Without the stream, the follower takes it if its own
		// read failed (nodestream.Follower.Adopt).
		list = l
		if meta != nil {
			raiseTo(&c.nodesAtLeast, meta.LastIndex)
			if c.nodeFollower != nil {
				c.nodeFollower.Adopt(l, meta.LastIndex)
			}
		}
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	groupOf, err := c.groups.Groups(ctx, c.opt.Nodes, c.opt.Rules.NodeGroups(), list, nodes)
	if err != nil {
		return nil, nil, err
	}
	return nodes, groupOf, nil
}

// readOptOut puts in s.optOut the pending hosts whose node's owner holds it
// out of the rollout (node meta rollboot_pause), with the reason, as package
// optout asks Nomad. A node that cannot be asked about holds its host (fail
// closed), with the error as its reason.
func (c *Coordinator) readOptOut(ctx context.Context, s *snapshot) {
	pending := map[string]optout.Pending{}
	for _, name := range s.names {
		if hv := s.hosts[name]; s.plans[name].Phase == store.PhasePending && hv.node != nil && s.nodes[hv.node.ID] != nil {
			pending[name] = optout.Pending{NodeID: hv.node.ID, ModifyIndex: s.nodes[hv.node.ID].ModifyIndex}
		}
	}
	var err error
	if s.optOut, err = c.optOut.HostReasons(ctx, c.opt.Nodes, pending); err != nil {
		c.log.Warn("node meta opt-out cannot be read: holding the hosts asked about", "err", err)
	}
}

// newNodeFollower is the node list's follower of a term, which keeps the
// mailbox's list current from Nomad's event stream, and from blocking queries
// while the stream cannot be had (package nodestream); the loop tells it
// after each pass which nodes to follow one by one while the stream cannot be
// had (watchCycleNodes).
func (c *Coordinator) newNodeFollower(poke func()) *nodestream.Follower {
	return &nodestream.Follower{Events: c.opt.NodeEvents, Nodes: c.opt.Nodes, Sink: nodeSink{&c.mail},
		Poke: poke, Log: c.log, Relist: c.opt.Resync, OnState: func(s nodestream.State) {
			c.metrics.NodeWatch(s)
			c.mail.update(func(a *answers) { a.nodeWatch = s })
			poke() // status says how the nodes are followed (package enforcement)
		}}
}

// cycleNodes returns the nodes of the hosts in their cycle (draining to
// rejoining, and stuck): what the passes wait on.
func cycleNodes(plans map[string]store.Plan) []string {
	var ids []string
	for _, p := range plans {
		switch p.Phase {
		case store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining, store.PhaseStuck:
			if p.NodeID != "" {
				ids = append(ids, p.NodeID)
			}
		}
	}
	return ids
}

// nodeSink is the mailbox as the node follower's sink.
type nodeSink struct{ m *mailbox }

func (s nodeSink) SetNodes(list []*api.NodeListStub, index uint64) { s.m.setNodes(list, index) }

// NodesWritten keeps the heartbeat indexes and the capacity of nodes the
// follower saw in full (the event stream's payload, or a node's own blocking
// query): a pass that needs a node's events at the ModifyIndex its list shows
// takes them instead of reading the node (caches.go readHeartbeats), and so
// does the capacity gate for the node's resources (capacityread.Reader.Streamed).
func (s nodeSink) NodesWritten(nodes []*api.Node) {
	s.m.update(func(a *answers) {
		for _, n := range nodes {
			a.nodeEvents.Put(n.ID, n.ModifyIndex, heartbeatread.Of(n))
			a.nodeCapacity.Put(n.ID, n.ModifyIndex, capacity.NodeOf(n))
		}
	})
}
func (s nodeSink) NodesAt(index uint64) bool { return s.m.nodesAt(index) }

// catchUpWait is how long a pass waits for the node events of its own last
// node write before it reads the whole list itself (nodeList). The event
// follows the write's answer within milliseconds; a pass chained after a
// drain or an eligibility change would otherwise read every node again.
const catchUpWait = 250 * time.Millisecond

// nodeGone says why the node p's cycle took out of service is no longer its
// host's (phase.NodeGone), from the node list the pass read; "" for a host not
// out of service. The nodes by name are indexed once per pass, the first time
// a cycle's node is not listed as its host's.
func (s *snapshot) nodeGone(p store.Plan) string {
	if !p.Active() || p.NodeID == "" {
		return ""
	}
	n := s.nodes[p.NodeID]
	if n != nil && n.Name == p.Host && n.Status != api.NodeStatusDown {
		return "" // the common case: no index needed
	}
	if s.nodesByName == nil {
		s.nodesByName = make(map[string][]phase.ListedNode, len(s.nodes))
		for _, m := range s.nodes {
			s.nodesByName[m.Name] = append(s.nodesByName[m.Name], listedNode(m))
		}
	}
	var planNode *phase.ListedNode
	if n != nil {
		l := listedNode(n)
		planNode = &l
	}
	return phase.NodeGone(p.Host, p.NodeID, planNode, s.nodesByName[p.Host])
}

func listedNode(n *api.NodeListStub) phase.ListedNode {
	return phase.ListedNode{ID: n.ID, Name: n.Name, Status: n.Status, CreateIndex: n.CreateIndex}
}

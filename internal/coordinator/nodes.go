package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// One node list per pass. The node watch's blocking query already reads the
// whole list at every change: a pass takes that list instead of reading it
// again (or reads it itself when the watch has no answer, as outside Run), unless it is older than the coordinator's own last node write (a drain,
// an eligibility change: the next pass must see it, or it would issue the drain
// again). And a group's members are the nodes its filter matches as Nomad
// evaluates it, on the full node (Meta, Attributes), which only Nomad can say:
// they are asked again only for the nodes whose ModifyIndex changed (every
// change to a node, its meta included, bumps it; heartbeats do not), with
// `ID == ...` added to each group's filter; everything again when many changed.
// So a pass over an idle cluster reads no node at all, and one during a rollout
// reads a few nodes per group instead of every node once plus once per group.

// maxTargetedNodes is how many changed nodes are asked for by ID; beyond it
// each group's whole list is read again (a new leader, a cluster that changed
// all at once).
const maxTargetedNodes = 32

// groupsAsked is the nodes' groups as last asked of Nomad (the pass
// goroutine's).
type groupsAsked struct {
	// groupOf: each node's group; groups: the groups (names and filters, in
	// match order) they were asked of. A policy that changes the groups makes
	// every node's group unknown.
	groupOf map[string]string
	groups  string
	// seen: the nodes groupOf stands for, by ID, as the list showed them: a
	// node whose ModifyIndex moved since is asked again, unless only its state
	// changed (onIdentity).
	seen map[string]*api.NodeListStub
}

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
	if w := c.seen.nodes; w.live && w.index >= least {
		return w.val
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
		return w.val
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
	groupOf, err := c.nodeGroups(ctx, list, nodes)
	if err != nil {
		return nil, nil, err
	}
	return nodes, groupOf, nil
}

// nodeGroups returns the group of every node, asking Nomad only about the nodes
// that changed since it last asked.
func (c *Coordinator) nodeGroups(ctx context.Context, list []*api.NodeListStub, nodes map[string]*api.NodeListStub) (map[string]string, error) {
	g := &c.groups
	key := groupsKey(c.opt.Groups)
	prev, seen := g.groupOf, g.seen
	if g.groups != key {
		prev, seen = nil, nil
	}
	identity := onIdentity(c.opt.Groups)
	var changed []string
	for _, n := range list {
		if m, ok := seen[n.ID]; !ok || m.ModifyIndex != n.ModifyIndex {
			if identity && prev != nil && sameIdentity(m, n) {
				// Its drain, status or eligibility changed (most changes
				// in a rollout), not what the groups select on.
				continue
			}
			changed = append(changed, n.ID)
		}
	}
	gone := false
	for id := range seen {
		if nodes[id] == nil {
			gone = true
			break
		}
	}
	if prev != nil && len(changed) == 0 && !gone {
		g.seen = nodes
		return prev, nil
	}
	var only []string // nil: every node
	if prev != nil && len(changed) <= maxTargetedNodes {
		only = append([]string{}, changed...) // none (nodes only went): ask nothing
	}
	found, err := c.membersOf(ctx, list, only)
	if err != nil {
		return nil, err
	}
	groupOf := make(map[string]string, len(nodes))
	asked := map[string]bool{}
	for _, id := range only {
		asked[id] = true
	}
	for _, n := range list {
		switch g, ok := found[n.ID]; {
		case only == nil || asked[n.ID]:
			if ok {
				groupOf[n.ID] = g
			}
		default:
			if g, ok := prev[n.ID]; ok {
				groupOf[n.ID] = g
			}
		}
	}
	*g = groupsAsked{groupOf: groupOf, groups: key, seen: nodes}
	return groupOf, nil
}

// onIdentity reports whether every group's filter selects only on a node's
// identity (policy.FilterOnIdentity): then a node whose identity the list
// shows unchanged keeps its group without asking Nomad.
func onIdentity(groups []GroupSpec) bool {
	for _, g := range groups {
		if g.Filter != "" && !policy.FilterOnIdentity(g.Filter) {
			return false
		}
	}
	return true
}

// sameIdentity reports whether the node list shows b with a's identity (a
// nil: not seen before).
func sameIdentity(a, b *api.NodeListStub) bool {
	return a != nil && a.ID == b.ID && a.Name == b.Name && a.NodePool == b.NodePool &&
		a.Datacenter == b.Datacenter && a.NodeClass == b.NodeClass
}

// groupsKey identifies what group membership depends on: the groups' names and
// filters in match order.
func groupsKey(groups []GroupSpec) string {
	var b strings.Builder
	for _, g := range groups {
		b.WriteString(g.Name)
		b.WriteByte(0)
		b.WriteString(g.Filter)
		b.WriteByte(0)
	}
	return b.String()
}

// membersOf asks Nomad which nodes each group's filter matches, first match
// wins: of every node (only nil), or of the nodes only names.
func (c *Coordinator) membersOf(ctx context.Context, list []*api.NodeListStub, only []string) (map[string]string, error) {
	groupOf := map[string]string{}
	idFilter := ""
	if only != nil {
		if len(only) == 0 {
			return groupOf, nil
		}
		ids := make([]string, len(only))
		for i, id := range only {
			ids[i] = "ID == " + strconv.Quote(id)
		}
		idFilter = strings.Join(ids, " or ")
	}
	for _, g := range c.opt.Groups {
		var members []*api.NodeListStub
		switch {
		case g.Filter == "" && only == nil:
			members = list
		case g.Filter == "":
			for _, n := range list {
				if slices.Contains(only, n.ID) {
					members = append(members, n)
				}
			}
		default:
			filter := g.Filter
			if idFilter != "" {
				filter = "(" + g.Filter + ") and (" + idFilter + ")"
			}
			var err error
			members, _, err = c.opt.Nodes.List((&api.QueryOptions{Filter: filter}).WithContext(ctx))
			if err != nil {
				return nil, fmt.Errorf("list nodes of group %s: %w", g.Name, err)
			}
		}
		for _, n := range members {
			if _, ok := groupOf[n.ID]; !ok {
				groupOf[n.ID] = g.Name
			}
		}
	}
	return groupOf, nil
}

// newNodeFollower is the node list's follower of a term, which keeps the
// mailbox's list current from Nomad's event stream, and from blocking queries
// while the stream cannot be had (package nodestream); the loop tells it
// after each pass which nodes to follow one by one while the stream cannot be
// had (watchCycleNodes).
func (c *Coordinator) newNodeFollower(poke func()) *nodestream.Follower {
	return &nodestream.Follower{Events: c.opt.NodeEvents, Nodes: c.opt.Nodes, Sink: nodeSink{&c.mail},
		Poke: poke, Log: c.log, Relist: c.opt.Resync, OnState: func(s nodestream.State) {
			c.metrics.nodeWatch(s)
			c.mail.update(func(a *answers) { a.nodeWatch = s })
			poke() // status says how the nodes are followed (policy.go publishEnforcement)
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

// nodeWatchText is what `rollboot status` says of how the nodes are followed:
// nothing while the event stream works.
func nodeWatchText(s nodestream.State) string {
	if s.Mode != nodestream.Blocking {
		return ""
	}
	return "blocking queries: the node event stream cannot be had (" + s.Reason + "); it is tried again now and then"
}

// nodeSink is the mailbox as the node follower's sink.
type nodeSink struct{ m *mailbox }

func (s nodeSink) SetNodes(list []*api.NodeListStub, index uint64) { s.m.setNodes(list, index) }

// NodesWritten keeps the heartbeat indexes of nodes the follower saw in full
// (the event stream's payload, or a node's own blocking query): a pass that
// needs a node's events at the ModifyIndex its list shows takes them instead
// of reading the node (caches.go readHeartbeats).
func (s nodeSink) NodesWritten(nodes []*api.Node) {
	s.m.update(func(a *answers) {
		if a.nodeEvents == nil {
			a.nodeEvents = map[string]indexed[heartbeatIndexes]{}
		}
		for _, n := range nodes {
			a.nodeEvents[n.ID] = indexed[heartbeatIndexes]{index: n.ModifyIndex, val: heartbeatIndexesOf(n)}
		}
	})
}
func (s nodeSink) NodesAt(index uint64) bool { return s.m.nodesAt(index) }

// catchUpWait is how long a pass waits for the node events of its own last
// node write before it reads the whole list itself (nodeList). The event
// follows the write's answer within milliseconds; a pass chained after a
// drain or an eligibility change would otherwise read every node again.
const catchUpWait = 250 * time.Millisecond

package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
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

// nodeCache is the node list as the watch last read it, and the groups of the
// nodes as last asked.
type nodeCache struct {
	mu sync.Mutex
	// list and index: the watch's last answer (nil: none, or it failed).
	list  []*api.NodeListStub
	index uint64
	// wrote is the index of the coordinator's last node write: a list older
	// than that does not show it.
	wrote uint64
	// groupOf: each node's group; groups: the groups (names and filters, in
	// match order) they were asked of. A policy that changes the groups makes
	// every node's group unknown.
	groupOf map[string]string
	groups  string
	// seen: the nodes groupOf stands for, by ID, as the list showed them: a
	// node whose ModifyIndex moved since is asked again, unless only its
	// state changed (onIdentity).
	seen map[string]*api.NodeListStub
	// kept is closed and replaced whenever the watch keeps a list (caughtUp).
	kept chan struct{}
}

// setList keeps the watch's answer (nil: forget the list), unless it is older
// than the one kept (an answer that took longer than the next one).
func (n *nodeCache) setList(list []*api.NodeListStub, index uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if list != nil && n.list != nil && index < n.index {
		return
	}
	n.list, n.index = list, index
	if n.kept != nil {
		close(n.kept)
		n.kept = nil
	}
}

// written records the index of a node write of ours.
func (n *nodeCache) written(index uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wrote = max(n.wrote, index)
}

// current returns the watch's list if it shows every write of ours.
func (n *nodeCache) current() []*api.NodeListStub {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.list == nil || n.index < n.wrote {
		return nil
	}
	return n.list
}

// forget drops everything (a new term: another coordinator may have written).
func (n *nodeCache) forget() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list, n.index, n.wrote, n.groupOf, n.groups, n.seen = nil, 0, 0, nil, "", nil
}

// writeIndexNodes records the index of every node write, so that the next pass
// does not take a node list older than it (nodeCache.current).
type writeIndexNodes struct {
	NodesAPI
	cache *nodeCache
}

func (w writeIndexNodes) UpdateDrainOpts(nodeID string, opts *api.DrainOptions, q *api.WriteOptions) (*api.NodeDrainUpdateResponse, error) {
	r, err := w.NodesAPI.UpdateDrainOpts(nodeID, opts, q)
	if err == nil && r != nil {
		w.cache.written(max(r.NodeModifyIndex, r.LastIndex))
	}
	return r, err
}

func (w writeIndexNodes) ToggleEligibility(nodeID string, eligible bool, q *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error) {
	r, err := w.NodesAPI.ToggleEligibility(nodeID, eligible, q)
	if err == nil && r != nil {
		w.cache.written(max(r.NodeModifyIndex, r.LastIndex))
	}
	return r, err
}

// readNodes returns every node, and the group of each (the first group whose
// filter matches it, as Nomad evaluates it).
func (c *Coordinator) readNodes(ctx context.Context) (map[string]*api.NodeListStub, map[string]string, error) {
	list := c.nodeCache.current()
	if list == nil {
		list = c.nodeCache.caughtUp(ctx, catchUpWait) // nodewatch.go
	}
	if list == nil {
		l, _, err := c.opt.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, nil, fmt.Errorf("list nodes: %w", err)
		}
		// Not kept for the next pass: only the watch knows when it changes.
		list = l
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
	cache := &c.nodeCache
	cache.mu.Lock()
	prev, seen := cache.groupOf, cache.seen
	if cache.groups != groupsKey(c.opt.Groups) {
		prev, seen = nil, nil
	}
	cache.mu.Unlock()
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
		cache.mu.Lock()
		cache.seen = nodes
		cache.mu.Unlock()
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
	cache.mu.Lock()
	cache.groupOf, cache.groups = groupOf, groupsKey(c.opt.Groups)
	cache.seen = nodes
	cache.mu.Unlock()
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

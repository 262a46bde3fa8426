// Package nodegroups tells each Nomad node's group: the first group whose
// filter selects it, as Nomad evaluates the filter on the full node (Meta,
// Attributes), which only Nomad can say. Nomad is asked again only about the
// nodes whose ModifyIndex changed (every change to a node, its meta included,
// bumps it; heartbeats do not), with `ID == ...` added to each group's filter;
// about every node again when many changed. When every filter selects on the
// node's identity alone, a node whose list entry shows the same identity keeps
// its group without asking.
package nodegroups

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
)

// Group is a group's name and its Nomad filter expression ("" selects every
// node), in match order.
type Group struct {
	Name, Filter string
}

// Lister lists the nodes a filter selects; *api.Nodes implements it.
type Lister interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
}

// MaxTargeted is how many changed nodes are asked for by ID; beyond it
// each group's whole list is read again (a new leader, a cluster that changed
// all at once).
const MaxTargeted = 32

// Asker is the nodes' groups as last asked of Nomad. It is used by one
// goroutine (the coordinator's pass); its zero value knows nothing.
type Asker struct {
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

// Groups returns the group of every node of list (nodes: the same, by ID),
// the first of groups whose filter selects it, asking Nomad only about the
// nodes that changed since it last asked. A node no group selects has none.
func (g *Asker) Groups(ctx context.Context, nodesAPI Lister, groups []Group, list []*api.NodeListStub,
	nodes map[string]*api.NodeListStub) (map[string]string, error) {
	key := groupsKey(groups)
	prev, seen := g.groupOf, g.seen
	if g.groups != key {
		prev, seen = nil, nil
	}
	identity := onIdentity(groups)
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
	if prev != nil && len(changed) <= MaxTargeted {
		only = append([]string{}, changed...) // none (nodes only went): ask nothing
	}
	found, err := membersOf(ctx, nodesAPI, groups, list, only)
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
	*g = Asker{groupOf: groupOf, groups: key, seen: nodes}
	return groupOf, nil
}

// onIdentity reports whether every group's filter selects only on a node's
// identity (policy.FilterOnIdentity): then a node whose identity the list
// shows unchanged keeps its group without asking Nomad.
func onIdentity(groups []Group) bool {
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
func groupsKey(groups []Group) string {
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
func membersOf(ctx context.Context, nodesAPI Lister, groups []Group, list []*api.NodeListStub, only []string) (map[string]string, error) {
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
	for _, g := range groups {
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
			members, _, err = nodesAPI.List((&api.QueryOptions{Filter: filter}).WithContext(ctx))
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

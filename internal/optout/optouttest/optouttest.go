// Package optouttest is a fake of the Nomad node API that package optout asks,
// for the tests of optout and of its callers.
package optouttest

import (
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Nodes is optout.Nodes over nodes with meta: List answers the opt-out filter
// with the nodes that have the key (by ID when the filter names them). Lists
// and Reads count its List and Info calls; Fail, when set, fails every List.
type Nodes struct {
	Nodes        map[string]*api.Node
	Lists, Reads int
	Fail         error
}

// List answers the opt-out filter.
func (n *Nodes) List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	n.Lists++
	if n.Fail != nil {
		return nil, nil, n.Fail
	}
	var out []*api.NodeListStub
	for id, node := range n.Nodes {
		byID := strings.Contains(q.Filter, "ID == ")
		if _, ok := node.Meta["rollboot_pause"]; ok && (!byID || strings.Contains(q.Filter, `"`+id+`"`)) {
			out = append(out, &api.NodeListStub{ID: id, ModifyIndex: node.ModifyIndex})
		}
	}
	return out, &api.QueryMeta{LastIndex: 1}, nil
}

// Info returns the node id.
func (n *Nodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.Reads++
	return n.Nodes[id], &api.QueryMeta{LastIndex: 1}, nil
}

// Pending is the nodes ids as the node list shows them: their ModifyIndex.
func (n *Nodes) Pending(ids ...string) map[string]uint64 {
	out := map[string]uint64{}
	for _, id := range ids {
		out[id] = n.Nodes[id].ModifyIndex
	}
	return out
}

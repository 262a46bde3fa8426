package optout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nodegroups"
)

// metaNodes is Nodes over nodes with meta: List answers the opt-out filter
// with the nodes that have the key (by ID when the filter names them), and
// counts its calls and Info's.
type metaNodes struct {
	nodes       map[string]*api.Node
	lists, info int
	fail        error
}

func (n *metaNodes) List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	n.lists++
	if n.fail != nil {
		return nil, nil, n.fail
	}
	var out []*api.NodeListStub
	for id, node := range n.nodes {
		byID := strings.Contains(q.Filter, "ID == ")
		if _, ok := node.Meta["rollboot_pause"]; ok && (!byID || strings.Contains(q.Filter, `"`+id+`"`)) {
			out = append(out, &api.NodeListStub{ID: id, ModifyIndex: node.ModifyIndex})
		}
	}
	return out, &api.QueryMeta{LastIndex: 1}, nil
}

func (n *metaNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.info++
	return n.nodes[id], &api.QueryMeta{LastIndex: 1}, nil
}

// pending is the nodes ids as the node list shows them.
func (n *metaNodes) pending(ids ...string) map[string]uint64 {
	out := map[string]uint64{}
	for _, id := range ids {
		out[id] = n.nodes[id].ModifyIndex
	}
	return out
}

// A node that carries rollboot_pause opts out with its value; a node is asked
// about again only when its ModifyIndex moved (a meta change raises it), and
// one that cannot be asked about opts out with the error.
func TestReasons(t *testing.T) {
	n := &metaNodes{nodes: map[string]*api.Node{
		"na": {ID: "na", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "benchmark"}},
		"nb": {ID: "nb", ModifyIndex: 5, Meta: map[string]string{}},
		"nc": {ID: "nc", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "not pending: not asked"}},
	}}
	var a Asker
	got, err := a.Reasons(t.Context(), n, n.pending("na", "nb"))
	if err != nil || len(got) != 1 || got["na"] != "benchmark" {
		t.Fatalf("opt-outs %v (%v), want na's alone", got, err)
	}
	if n.lists != 1 || n.info != 1 {
		t.Errorf("%d lists and %d node reads, want 1 and 1 (the node that has the key)", n.lists, n.info)
	}

	// Nothing changed: nothing asked, the same answer.
	got, _ = a.Reasons(t.Context(), n, n.pending("na", "nb"))
	if n.lists != 1 || n.info != 1 || got["na"] != "benchmark" {
		t.Errorf("unchanged nodes asked again (%d lists, %d reads) or answer lost: %v", n.lists, n.info, got)
	}

	// na's owner removes the key, nb's sets it: their ModifyIndex moves.
	n.nodes["na"] = &api.Node{ID: "na", ModifyIndex: 6, Meta: map[string]string{}}
	n.nodes["nb"] = &api.Node{ID: "nb", ModifyIndex: 6, Meta: map[string]string{"rollboot_pause": ""}}
	got, _ = a.Reasons(t.Context(), n, n.pending("na", "nb"))
	if len(got) != 1 || got["nb"] != "(no reason given)" {
		t.Fatalf("after the meta changes: %v, want nb's alone", got)
	}

	// Fail closed: a node Nomad cannot say about opts out with the error.
	n.nodes["na"].ModifyIndex, n.fail = 7, errors.New("permission denied")
	got, err = a.Reasons(t.Context(), n, n.pending("na", "nb"))
	if why := got["na"]; err == nil || !strings.Contains(why, "cannot read the node's meta") || !strings.Contains(why, "permission denied") {
		t.Errorf("na after a failed read: %q (%v), want held with the error", why, err)
	}
	if got["nb"] != "(no reason given)" {
		t.Errorf("nb, not asked again, lost its opt-out: %v", got)
	}

	// A node no longer pending is forgotten: asked again once it is.
	n.fail = nil
	a.Reasons(t.Context(), n, n.pending("na"))
	lists := n.lists
	if got, _ := a.Reasons(t.Context(), n, n.pending("na", "nb")); n.lists != lists+1 || got["nb"] != "(no reason given)" {
		t.Errorf("nb pending again: %d lists, opt-outs %v; want it asked again", n.lists-lists, got)
	}
}

// Many nodes asked about at once (a new leader's first pass, every host
// pending) are asked in one list of every node that has the key, not one per
// batch.
func TestReasonsManyPending(t *testing.T) {
	n := &metaNodes{nodes: map[string]*api.Node{}}
	var ids []string
	for i := range 3 * nodegroups.MaxTargeted {
		id := fmt.Sprintf("n%03d", i)
		n.nodes[id] = &api.Node{ID: id, ModifyIndex: 5, Meta: map[string]string{}}
		ids = append(ids, id)
	}
	n.nodes["n007"].Meta["rollboot_pause"] = "kept for a demo"
	var a Asker
	got, err := a.Reasons(t.Context(), n, n.pending(ids...))
	if err != nil || n.lists != 1 || n.info != 1 || len(got) != 1 || got["n007"] != "kept for a demo" {
		t.Errorf("%d lists, %d node reads, opt-outs %v (%v): want 1, 1 and n007's", n.lists, n.info, got, err)
	}
}

// HostReasons answers by host what Reasons answers by node.
func TestHostReasons(t *testing.T) {
	n := &metaNodes{nodes: map[string]*api.Node{
		"na": {ID: "na", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "benchmark"}},
		"nb": {ID: "nb", ModifyIndex: 5, Meta: map[string]string{}},
	}}
	var a Asker
	got, err := a.HostReasons(t.Context(), n, map[string]Pending{"web-1": {NodeID: "na", ModifyIndex: 5}, "web-2": {NodeID: "nb", ModifyIndex: 5}})
	if err != nil || len(got) != 1 || got["web-1"] != "benchmark" {
		t.Errorf("opt-outs %v (%v), want web-1's alone", got, err)
	}
}

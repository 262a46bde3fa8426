package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/optout/optouttest"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// metaNodes is a NodesAPI over nodes with meta (optouttest.Nodes).
type metaNodes struct {
	NodesAPI
	*optouttest.Nodes
}

func (n metaNodes) List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return n.Nodes.List(q)
}

func (n metaNodes) Info(id string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	return n.Nodes.Info(id, q)
}

// optOutSnapshot is a pass's snapshot with hosts a and b pending on nodes na
// and nb, and c idle on nc, as the node list shows the nodes.
func optOutSnapshot(n metaNodes) *snapshot {
	s := &snapshot{names: []string{"a", "b", "c"}, hosts: map[string]*hostView{}, nodes: map[string]*api.NodeListStub{},
		plans: map[string]store.Plan{"a": {Phase: store.PhasePending}, "b": {Phase: store.PhasePending}, "c": {Phase: store.PhaseIdle}}}
	for _, h := range s.names {
		id := "n" + h
		s.hosts[h] = &hostView{node: &phase.NodeView{ID: id}}
		s.nodes[id] = &api.NodeListStub{ID: id, ModifyIndex: n.Nodes.Nodes[id].ModifyIndex}
	}
	return s
}

// A pending host whose node carries rollboot_pause is held with its value
// (package optout asks); only pending hosts' nodes are asked about, and one
// that cannot be asked about holds its host.
func TestReadOptOut(t *testing.T) {
	n := metaNodes{Nodes: &optouttest.Nodes{Nodes: map[string]*api.Node{
		"na": {ID: "na", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "benchmark"}},
		"nb": {ID: "nb", ModifyIndex: 5, Meta: map[string]string{}},
		"nc": {ID: "nc", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "idle host: not asked"}},
	}}}
	c := New(Options{Deps: Deps{Nodes: n}})
	s := optOutSnapshot(n)
	c.readOptOut(t.Context(), s)
	if len(s.optOut) != 1 || s.optOut["a"] != "benchmark" {
		t.Fatalf("opt-outs %v, want a's alone", s.optOut)
	}
	if n.Lists != 1 || n.Reads != 1 {
		t.Errorf("%d lists and %d node reads, want 1 and 1 (the node that has the key)", n.Lists, n.Reads)
	}

	// Fail closed: a node Nomad cannot say about holds its host.
	n.Nodes.Nodes["na"].ModifyIndex, n.Fail = 7, errors.New("permission denied")
	s = optOutSnapshot(n)
	c.readOptOut(t.Context(), s)
	if why := s.optOut["a"]; !strings.Contains(why, "cannot read the node's meta") || !strings.Contains(why, "permission denied") {
		t.Errorf("a after a failed read: %q, want held with the error", why)
	}
}

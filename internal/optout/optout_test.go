package optout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nodegroups"
	"github.com/rollboot/rollboot/internal/optout/optouttest"
)

// A node that carries rollboot_pause opts out with its value; a node is asked
// about again only when its ModifyIndex moved (a meta change raises it), and
// one that cannot be asked about opts out with the error.
func TestReasons(t *testing.T) {
	n := &optouttest.Nodes{Nodes: map[string]*api.Node{
		"na": {ID: "na", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "benchmark"}},
		"nb": {ID: "nb", ModifyIndex: 5, Meta: map[string]string{}},
		"nc": {ID: "nc", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "not pending: not asked"}},
	}}
	var a Asker
	got, err := a.Reasons(t.Context(), n, n.Pending("na", "nb"))
	if err != nil || len(got) != 1 || got["na"] != "benchmark" {
		t.Fatalf("opt-outs %v (%v), want na's alone", got, err)
	}
	if n.Lists != 1 || n.Reads != 1 {
		t.Errorf("%d lists and %d node reads, want 1 and 1 (the node that has the key)", n.Lists, n.Reads)
	}

	// Nothing changed: nothing asked, the same answer.
	got, _ = a.Reasons(t.Context(), n, n.Pending("na", "nb"))
	if n.Lists != 1 || n.Reads != 1 || got["na"] != "benchmark" {
		t.Errorf("unchanged nodes asked again (%d lists, %d reads) or answer lost: %v", n.Lists, n.Reads, got)
	}

	// na's owner removes the key, nb's sets it: their ModifyIndex moves.
	n.Nodes["na"] = &api.Node{ID: "na", ModifyIndex: 6, Meta: map[string]string{}}
	n.Nodes["nb"] = &api.Node{ID: "nb", ModifyIndex: 6, Meta: map[string]string{"rollboot_pause": ""}}
	got, _ = a.Reasons(t.Context(), n, n.Pending("na", "nb"))
	if len(got) != 1 || got["nb"] != "(no reason given)" {
		t.Fatalf("after the meta changes: %v, want nb's alone", got)
	}

	// Fail closed: a node Nomad cannot say about opts out with the error.
	n.Nodes["na"].ModifyIndex, n.Fail = 7, errors.New("permission denied")
	got, err = a.Reasons(t.Context(), n, n.Pending("na", "nb"))
	if why := got["na"]; err == nil || !strings.Contains(why, "cannot read the node's meta") || !strings.Contains(why, "permission denied") {
		t.Errorf("na after a failed read: %q (%v), want held with the error", why, err)
	}
	if got["nb"] != "(no reason given)" {
		t.Errorf("nb, not asked again, lost its opt-out: %v", got)
	}

	// A node no longer pending is forgotten: asked again once it is.
	n.Fail = nil
	a.Reasons(t.Context(), n, n.Pending("na"))
	lists := n.Lists
	if got, _ := a.Reasons(t.Context(), n, n.Pending("na", "nb")); n.Lists != lists+1 || got["nb"] != "(no reason given)" {
		t.Errorf("nb pending again: %d lists, opt-outs %v; want it asked again", n.Lists-lists, got)
	}
}

// Many nodes asked about at once (a new leader's first pass, every host
// pending) are asked in one list of every node that has the key, not one per
// batch.
func TestReasonsManyPending(t *testing.T) {
	n := &optouttest.Nodes{Nodes: map[string]*api.Node{}}
	var ids []string
	for i := range 3 * nodegroups.MaxTargeted {
		id := fmt.Sprintf("n%03d", i)
		n.Nodes[id] = &api.Node{ID: id, ModifyIndex: 5, Meta: map[string]string{}}
		ids = append(ids, id)
	}
	n.Nodes["n007"].Meta["rollboot_pause"] = "kept for a demo"
	var a Asker
	got, err := a.Reasons(t.Context(), n, n.Pending(ids...))
	if err != nil || n.Lists != 1 || n.Reads != 1 || len(got) != 1 || got["n007"] != "kept for a demo" {
		t.Errorf("%d lists, %d node reads, opt-outs %v (%v): want 1, 1 and n007's", n.Lists, n.Reads, got, err)
	}
}

// HostReasons answers by host what Reasons answers by node.
func TestHostReasons(t *testing.T) {
	n := &optouttest.Nodes{Nodes: map[string]*api.Node{
		"na": {ID: "na", ModifyIndex: 5, Meta: map[string]string{"rollboot_pause": "benchmark"}},
		"nb": {ID: "nb", ModifyIndex: 5, Meta: map[string]string{}},
	}}
	var a Asker
	got, err := a.HostReasons(t.Context(), n, map[string]Pending{"web-1": {NodeID: "na", ModifyIndex: 5}, "web-2": {NodeID: "nb", ModifyIndex: 5}})
	if err != nil || len(got) != 1 || got["web-1"] != "benchmark" {
		t.Errorf("opt-outs %v (%v), want web-1's alone", got, err)
	}
}

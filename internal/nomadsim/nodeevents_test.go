package nomadsim

import (
	"fmt"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// A client's node events are appended to its node, which keeps its 10 newest:
// ten driver events push a drain's completion out. The node's ModifyIndex does
// not move (upsertNodeEvents), the nodes table's index does.
func TestEmitNodeEventKeepsTheNewestTen(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	h := s.Hosts()[0]
	if _, err := c.Nodes().UpdateDrainOpts(h.NodeID, &api.DrainOptions{DrainSpec: &api.DrainSpec{IgnoreSystemJobs: true}}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := s.WaitFor(ctx, func(v *View) bool {
		n, ok := v.Node(h.NodeID)
		return ok && n.LastDrain != nil && n.LastDrain.Status == api.DrainStatusComplete
	}); err != nil {
		t.Fatal(err)
	}
	before, _, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil || lastEvent(before).Message != "Node drain complete" {
		t.Fatalf("after the drain: %+v %v", before, err)
	}
	_, listed, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxRetainedNodeEvents {
		msg := fmt.Sprintf("Driver docker is unhealthy (%d)", i)
		if err := s.EmitNodeEvent(h.Name, "Driver", msg, map[string]string{"driver": "docker"}); err != nil {
			t.Fatal(err)
		}
	}
	after, _, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Events) != maxRetainedNodeEvents || after.Events[0].Message != "Driver docker is unhealthy (0)" ||
		after.Events[0].Subsystem != "Driver" || after.Events[0].Details["driver"] != "docker" {
		t.Fatalf("events: %+v", after.Events)
	}
	for _, e := range after.Events {
		if e.Message == "Node drain complete" {
			t.Fatal("the drain's completion is still among the events")
		}
	}
	if after.ModifyIndex != before.ModifyIndex {
		t.Errorf("ModifyIndex moved from %d to %d", before.ModifyIndex, after.ModifyIndex)
	}
	if _, meta, err := c.Nodes().List(nil); err != nil || meta.LastIndex <= listed.LastIndex {
		t.Errorf("nodes index %d, was %d (%v)", meta.LastIndex, listed.LastIndex, err)
	}
	if err := s.EmitNodeEvent("nope", "Driver", "x", nil); err == nil {
		t.Error("an event for a host without a node")
	}
}

package heartbeatread

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/phase"
)

// countedNodes answers Info with a node at its ModifyIndex, counting the
// reads by node; a node named in failing cannot be read.
type countedNodes struct {
	mu      sync.Mutex // the reads run side by side
	modify  map[string]uint64
	reads   map[string]int
	failing string
}

func (n *countedNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads[id]++
	if id == n.failing {
		return nil, nil, errors.New("timeout")
	}
	// A heartbeat missed at its ModifyIndex: enough to tell reads apart.
	return &api.Node{ID: id, ModifyIndex: n.modify[id], Events: []*api.NodeEvent{
		{Message: EventHeartbeatMissed, CreateIndex: n.modify[id]}}}, &api.QueryMeta{}, nil
}

// A node is read only when neither what was kept nor what was streamed is at
// the ModifyIndex its view shows; a read that fails is returned at its
// position; what is kept then is what this call found.
func TestReadOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	n := &countedNodes{modify: map[string]uint64{"a": 5, "b": 7, "c": 9}, reads: map[string]int{}}
	var kept, streamed byindex.Cache[Indexes]
	views := func(ids ...string) []*phase.NodeView {
		var out []*phase.NodeView
		for _, id := range ids {
			out = append(out, &phase.NodeView{ID: id, ModifyIndex: n.modify[id]})
		}
		return out
	}
	streamed.Put("b", 7, Indexes{Missed: 70})
	vs := views("a", "b")
	if errs := Read(ctx, n, vs, &kept, &streamed, 4); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if n.reads["a"] != 1 || n.reads["b"] != 0 || vs[0].MissedHeartbeatIndex != 5 || vs[1].MissedHeartbeatIndex != 70 {
		t.Fatalf("reads %v, views %+v %+v; want a read, b from the stream", n.reads, vs[0], vs[1])
	}
	n.failing = "c"
	vs = views("a", "b", "c")
	errs := Read(ctx, n, vs, &kept, &streamed, 4)
	if errs[2] == nil || errs[0] != nil || n.reads["a"] != 1 || n.reads["b"] != 0 {
		t.Fatalf("errs %v, reads %v; want c failed and a, b kept", errs, n.reads)
	}
	if Read(ctx, n, views("b"), &kept, &streamed, 4); kept.Len() != 1 {
		t.Fatalf("%d kept after a call that asked for b alone", kept.Len())
	}
	if Read(ctx, n, views("a", "b"), &kept, &streamed, 4); n.reads["a"] != 2 || n.reads["b"] != 0 {
		t.Errorf("reads %v; want a read again (forgotten), b kept", n.reads)
	}
	n.modify["b"] = 8
	if Read(ctx, n, views("b"), &kept, &streamed, 4); n.reads["b"] != 1 {
		t.Errorf("reads %v; want b read once its ModifyIndex moved", n.reads)
	}
}

// Of takes each kind's newest event, whatever the order Nomad lists them in,
// and ignores the other messages.
func TestOf(t *testing.T) {
	ev := func(msg string, idx uint64) *api.NodeEvent { return &api.NodeEvent{Message: msg, CreateIndex: idx} }
	n := &api.Node{Events: []*api.NodeEvent{
		ev("Node registered", 1), ev(EventHeartbeatMissed, 9), ev(EventHeartbeatMissed, 4),
		ev(EventReregistered, 5), ev(EventReregisteredByHeartbeat, 11), ev(EventMarkedIneligible, 6),
		ev(EventMarkedEligible, 3), ev(EventDrainComplete, 7), ev("Node drain strategy set", 12),
	}}
	want := Indexes{Reregistered: 11, Missed: 9, Eligibility: 6, DrainDone: 7}
	if got := Of(n); got != want {
		t.Errorf("Of = %+v, want %+v", got, want)
	}
	if got := Of(&api.Node{}); got != (Indexes{}) {
		t.Errorf("Of a node without events = %+v, want none", got)
	}
}

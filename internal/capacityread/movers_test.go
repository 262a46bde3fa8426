package capacityread

import (
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacity"
)

// allocNodes answers each node's allocations from allocs and counts the reads
// by node.
type allocNodes struct {
	Nodes
	mu     sync.Mutex
	allocs map[string][]*api.Allocation
	reads  map[string]int
}

func (n *allocNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads[id]++
	return n.allocs[id], &api.QueryMeta{LastIndex: 1}, nil
}

func serviceAlloc(id, prev string) *api.Allocation {
	return &api.Allocation{ID: id, Name: "web.web[0]", JobID: "web", TaskGroup: "web", DesiredStatus: "run", ClientStatus: "running",
		PreviousAllocation: prev, Job: &api.Job{Type: new(api.JobTypeService)}}
}

// The movers of a node that is draining and ineligible are read once per
// ModifyIndex: later passes take them, but those whose migration's
// replacement shows among the allocations they read. A node not draining, or
// whose ModifyIndex moved, is read again.
func TestMoversKeptWhileDraining(t *testing.T) {
	n := &allocNodes{reads: map[string]int{}, allocs: map[string][]*api.Allocation{
		"out": {serviceAlloc("a1", ""), serviceAlloc("a2", "")},
		"up":  {serviceAlloc("a3", "")},
	}}
	r := &Reader{Nodes: n}
	draining := &api.NodeListStub{ID: "out", ModifyIndex: 5, Drain: true, SchedulingEligibility: api.NodeSchedulingIneligible}
	nodes := map[string]*api.NodeListStub{"out": draining,
		"up": {ID: "up", ModifyIndex: 5, SchedulingEligibility: api.NodeSchedulingEligible}}
	pass := func(ids ...string) *Pass {
		t.Helper()
		p := r.NewPass(nodes, nil, 0, nil)
		if r.Read(t.Context(), p, admission.CapacityNeeds{Allocs: ids}); p.Gate.Err != nil {
			t.Fatal(p.Gate.Err)
		}
		return p
	}
	ids := func(ms []capacity.Alloc) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	pass("out", "up")
	v := pass("out", "up")
	if n.reads["out"] != 1 || n.reads["up"] != 2 {
		t.Fatalf("reads %v, want the draining node once, the other at each pass", n.reads)
	}
	if got := ids(v.Gate.Movers["out"]); len(got) != 2 {
		t.Fatalf("kept movers %v, want a1 and a2", got)
	}
	// a1 migrated to the node read: its replacement names it.
	n.allocs["up"] = append(n.allocs["up"], serviceAlloc("a1-new", "a1"))
	v = pass("out", "up")
	if got := ids(v.Gate.Movers["out"]); len(got) != 1 || got[0] != "a2" || n.reads["out"] != 1 {
		t.Fatalf("movers %v after a1's replacement was read (reads %v), want a2 alone, still kept", got, n.reads)
	}
	// The drain completed: a new ModifyIndex, read again.
	nodes["out"] = &api.NodeListStub{ID: "out", ModifyIndex: 9, SchedulingEligibility: api.NodeSchedulingIneligible}
	pass("out")
	pass("out")
	if n.reads["out"] != 3 {
		t.Fatalf("%d reads of a node no longer draining, want one per pass after the kept one", n.reads["out"])
	}
}

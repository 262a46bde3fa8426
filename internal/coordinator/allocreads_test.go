package coordinator

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/store"
)

// blockingNodes answers a read of a node's allocations at once, at index 7, and
// holds a blocking query until it ends; it records the index of each query.
type blockingNodes struct {
	NodesAPI
	mu      sync.Mutex
	asked   []uint64 // phase.WaitIndex of each query
	blocked chan struct{}
}

func (n *blockingNodes) Allocations(_ string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	n.asked = append(n.asked, q.WaitIndex)
	n.mu.Unlock()
	if q.WaitIndex > 0 {
		n.blocked <- struct{}{}
		<-q.Context().Done()
		return nil, nil, q.Context().Err()
	}
	return []*api.Allocation{{Name: "web.web[0]"}}, &api.QueryMeta{LastIndex: 7}, nil
}

func (n *blockingNodes) queries() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]uint64(nil), n.asked...)
}

// A pass reads a node's allocations once, the capacity gate's read included;
// the watch that the pass starts for the node begins from that read: it asks
// past its index, with the read kept as its answer, and pokes no pass for it.
func TestAllocWatchStartsFromThePassRead(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Nodes: n})
	pass := &snapshot{capacity: &capacityView{allocs: map[string][]*api.Allocation{"n2": {{Name: "db.db[0]"}}}}}
	if _, err := c.systemJobs(t.Context(), pass, "n1"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.allocsOnNode(t.Context(), pass, "n2"); err != nil || len(got) != 1 || got[0].Name != "db.db[0]" {
		t.Fatalf("the capacity gate's read in the same pass: %+v, %v", got, err)
	}
	if q := n.queries(); len(q) != 1 {
		t.Fatalf("queries %v in the pass, want one (n1's)", q)
	}

	var pokes atomic.Int32
	w := &allocWatchers{watchSet: watchSet{ctx: t.Context()}, poke: func() { pokes.Add(1) }, c: c}
	defer w.stop()
	w.set(map[string]store.Plan{"h1": {Host: "h1", Phase: store.PhaseRejoining, NodeID: "n1", SystemJobs: []string{"default/agent"}}})
	select {
	case <-n.blocked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch did not block; queries %v", n.queries())
	}
	if q := n.queries(); len(q) != 2 || q[1] != 7 {
		t.Errorf("queries %v, want the pass's read and then the watch's from index 7", q)
	}
	c.mu.Lock()
	kept := c.watchedAllocs["n1"]
	c.mu.Unlock()
	if len(kept) != 1 || kept[0].Name != "web.web[0]" || pokes.Load() != 0 {
		t.Errorf("the watch kept %+v and poked %d passes, want the pass's read and none", kept, pokes.Load())
	}
}

// The capacity gate's reads side by side are kept for the watches like its
// single ones, with the index each was answered at.
func TestCapacityReadsAreKept(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Nodes: n})
	v := &capacityView{allocs: map[string][]*api.Allocation{}, gate: admission.Capacity{Movers: map[string][]capacity.Alloc{}}}
	if err := c.readAllocsOf(t.Context(), v, []string{"n1", "n2", "n1"}); err != nil {
		t.Fatal(err)
	}
	if q := n.queries(); len(q) != 2 {
		t.Errorf("queries %v, want one per node", q)
	}
	kept := c.takeAllocReads()
	for _, id := range []string{"n1", "n2"} {
		if r, ok := kept[id]; !ok || r.index != 7 || len(r.allocs) != 1 || len(v.allocs[id]) != 1 {
			t.Errorf("node %s: kept %+v (%v), in the view %+v", id, r, ok, v.allocs[id])
		}
	}
}

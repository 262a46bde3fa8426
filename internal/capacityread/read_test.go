package capacityread

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
)

// capWorld is a cluster whose nodes change (their memory, with their
// ModifyIndex), come and go; reads are counted by node.
type capWorld struct {
	Nodes
	mu     sync.Mutex // the reads run side by side
	memory map[string]int64
	reads  map[string]int
}

func (w *capWorld) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads[id]++
	return &api.Node{ID: id, Name: id, NodePool: "default", Datacenter: "dc1",
		NodeResources: &api.NodeResources{Memory: api.NodeMemoryResources{MemoryMB: w.memory[id]}}}, &api.QueryMeta{}, nil
}

// The capacity of the nodes a pass asks for is, over a randomly changing
// world, what a read of each says now; a node is read only when no pass read
// it at the ModifyIndex the list shows now; and the nodes gone are forgotten.
// The world: nodes resized (a write: a new ModifyIndex), written without a
// change that matters, added and removed; passes asking for some of them.
func TestCapacityNodesEqualFreshReads(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 47))
		w := &capWorld{memory: map[string]int64{}, reads: map[string]int{}}
		nodes := map[string]*api.NodeListStub{}
		index := uint64(1)
		for i := range 5 {
			id := fmt.Sprintf("n%d", i)
			w.memory[id], nodes[id] = 1024, &api.NodeListStub{ID: id, ModifyIndex: index}
		}
		r := &Reader{Nodes: w}
		read := map[string]uint64{} // the ModifyIndex each node was last read at
		for pass := range 40 {
			for range rng.IntN(4) {
				id := fmt.Sprintf("n%d", rng.IntN(7))
				index++
				switch n := nodes[id]; {
				case n == nil:
					w.memory[id], nodes[id] = int64(rng.IntN(4)+1)*1024, &api.NodeListStub{ID: id, ModifyIndex: index}
				case rng.IntN(4) == 0:
					delete(nodes, id)
				default:
					if rng.IntN(2) == 0 {
						w.memory[id] = int64(rng.IntN(4)+1) * 1024
					}
					nodes[id] = &api.NodeListStub{ID: id, ModifyIndex: index}
				}
			}
			var ids []string
			for _, id := range slices.Sorted(maps.Keys(nodes)) {
				if rng.IntN(2) == 0 {
					ids = append(ids, id)
				}
			}
			clear(w.reads)
			r.nodes.Prune(nodes) // as NewPass does
			got, err := r.capacityNodes(t.Context(), nodes, ids)
			if err != nil {
				t.Fatal(err)
			}
			for id := range read {
				if nodes[id] == nil {
					delete(read, id)
				}
			}
			for i, id := range ids {
				if got[i].Capacity.MemoryMB != w.memory[id] || got[i].Name != id {
					t.Fatalf("seed %d pass %d: node %s: %+v, want %d MB", seed, pass, id, got[i], w.memory[id])
				}
				at, ok := read[id]
				if wantRead := !ok || at != nodes[id].ModifyIndex; (w.reads[id] > 0) != wantRead {
					t.Fatalf("seed %d pass %d: node %s read %d times, want a read: %v", seed, pass, id, w.reads[id], wantRead)
				}
				read[id] = nodes[id].ModifyIndex
			}
			if r.nodes.Len() != len(read) {
				t.Fatalf("seed %d pass %d: %d nodes kept, want %d", seed, pass, r.nodes.Len(), len(read))
			}
		}
	}
}

// sameIndexNodes answers every node's allocations at index 7, side by side.
type sameIndexNodes struct {
	Nodes
	mu    sync.Mutex
	reads map[string]int
}

func (n *sameIndexNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads[id]++
	return []*api.Allocation{{ID: id + "-a", NodeID: id}}, &api.QueryMeta{LastIndex: 7}, nil
}

// Each read of a node's allocations, side by side, is told to AllocsRead
// with the index it was answered at (an allocation watch starts from it); a
// node asked for twice in a pass is read and told once.
func TestAllocsReadToldOfEachRead(t *testing.T) {
	n := &sameIndexNodes{reads: map[string]int{}}
	var mu sync.Mutex
	told := map[string]uint64{}
	r := &Reader{Nodes: n, AllocsRead: func(id string, meta *api.QueryMeta, allocs []*api.Allocation) {
		mu.Lock()
		defer mu.Unlock()
		if _, twice := told[id]; twice || len(allocs) != 1 {
			t.Errorf("node %s told again, or with %d allocations", id, len(allocs))
		}
		told[id] = meta.LastIndex
	}}
	p := r.NewPass(nil, nil, 0, nil)
	r.Read(t.Context(), p, admission.CapacityNeeds{Allocs: []string{"n1", "n2", "n1"}})
	r.Read(t.Context(), p, admission.CapacityNeeds{Allocs: []string{"n2", "n3"}})
	if p.Gate.Err != nil {
		t.Fatal(p.Gate.Err)
	}
	want := map[string]uint64{"n1": 7, "n2": 7, "n3": 7}
	if !maps.Equal(told, want) || !maps.Equal(n.reads, map[string]int{"n1": 1, "n2": 1, "n3": 1}) {
		t.Errorf("told %v after reads %v, want each node once at index 7", told, n.reads)
	}
}

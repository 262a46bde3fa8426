package capacityread

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/capacity"
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
	return w.node(id), &api.QueryMeta{}, nil
}

// node is node id as it is now.
func (w *capWorld) node(id string) *api.Node {
	return &api.Node{ID: id, Name: id, NodePool: "default", Datacenter: "dc1",
		NodeResources: &api.NodeResources{Memory: api.NodeMemoryResources{MemoryMB: w.memory[id]}}}
}

// The capacity of the nodes a pass asks for is, over a randomly changing
// world, what a read of each says now; a node is read only when neither a pass
// read it nor the node stream showed it (Streamed) at the ModifyIndex the list
// shows now; and the nodes gone are forgotten. The world: nodes resized (a
// write: a new ModifyIndex), written without a change that matters, added and
// removed, each write seen by the stream or not; passes asking for some of
// them.
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
		read := map[string]uint64{} // the ModifyIndex each node was last read or streamed at
		for pass := range 40 {
			var streamed byindex.Cache[capacity.Node]
			streamedAt := map[string]uint64{}
			for range rng.IntN(4) {
				id := fmt.Sprintf("n%d", rng.IntN(7))
				index++
				switch n := nodes[id]; {
				case n == nil:
					w.memory[id], nodes[id] = int64(rng.IntN(4)+1)*1024, &api.NodeListStub{ID: id, ModifyIndex: index}
				case rng.IntN(4) == 0:
					delete(nodes, id)
					continue
				default:
					if rng.IntN(2) == 0 {
						w.memory[id] = int64(rng.IntN(4)+1) * 1024
					}
					nodes[id] = &api.NodeListStub{ID: id, ModifyIndex: index}
				}
				if rng.IntN(2) == 0 {
					streamed.Put(id, index, capacity.NodeOf(w.node(id)))
					streamedAt[id] = index
				}
			}
			r.Streamed(streamed) // as the pass takes them (coordinator takeMail)
			for id, e := range streamedAt {
				read[id] = e // kept at that index, which a later write may have passed
			}
			var ids []string
			for _, id := range slices.Sorted(maps.Keys(nodes)) {
				if rng.IntN(2) == 0 {
					ids = append(ids, id)
				}
			}
			clear(w.reads)
			r.nodes.Prune(nodes) // as NewPass does
			got, err := r.capacityNodes(t.Context(), nodes, ids, nil)
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

// A node whose allocations the coordinator's pass read already (InPass) is
// taken as read, not read again: its movers are what that read shows.
func TestAllocsReadInThePassTaken(t *testing.T) {
	n := &sameIndexNodes{reads: map[string]int{}}
	service := "service"
	inPass := map[string][]*api.Allocation{"n1": {{ID: "n1-x", NodeID: "n1", JobID: "x", TaskGroup: "x",
		DesiredStatus: "run", ClientStatus: "running", Job: &api.Job{Type: &service}}}}
	r := &Reader{Nodes: n, InPass: func(id string) ([]*api.Allocation, bool) { a, ok := inPass[id]; return a, ok }}
	p := r.NewPass(nil, nil, 0, nil)
	r.Read(t.Context(), p, admission.CapacityNeeds{Allocs: []string{"n1", "n2"}})
	if p.Gate.Err != nil {
		t.Fatal(p.Gate.Err)
	}
	if !maps.Equal(n.reads, map[string]int{"n2": 1}) {
		t.Errorf("reads %v, want n2's only", n.reads)
	}
	if m := p.Gate.Movers["n1"]; len(m) != 1 || m[0].ID != "n1-x" {
		t.Errorf("n1's movers %v, want those of the pass's read", m)
	}
}

// slowWorld holds every read until Parallelism are in flight (or a second
// passed: a bound lower than that), then a little more, and counts the reads
// in flight, of both kinds together.
type slowWorld struct {
	mu                sync.Mutex
	inFlight, most    int
	infos, allocReads int
	full              chan struct{}
}

func (w *slowWorld) enter(info bool) {
	w.mu.Lock()
	w.inFlight++
	if w.inFlight == Parallelism && w.most < Parallelism {
		close(w.full)
	}
	w.most = max(w.most, w.inFlight)
	if info {
		w.infos++
	} else {
		w.allocReads++
	}
	w.mu.Unlock()
	select {
	case <-w.full:
	case <-time.After(time.Second):
	}
}

func (w *slowWorld) leave() {
	time.Sleep(2 * time.Millisecond) // long enough for the reads beside it to show
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
}

func (w *slowWorld) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	w.enter(true)
	defer w.leave()
	return &api.Node{ID: id, Name: id, NodePool: "p", Datacenter: "dc1"}, &api.QueryMeta{}, nil
}

func (w *slowWorld) Allocations(string, *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	w.enter(false)
	defer w.leave()
	return nil, &api.QueryMeta{}, nil
}

// A round's allocation and node reads share one bound, Parallelism: a round
// of allocation reads alone sends that many at once, and one of both kinds
// never more.
func TestRoundReadsShareOneBound(t *testing.T) {
	for _, tc := range []struct {
		name              string
		out, candidates   int
		infos, allocReads int
	}{
		{"allocations only", 3 * Parallelism, 0, 0, 3 * Parallelism},
		{"both kinds", 3 * Parallelism, 16, 16, 3*Parallelism + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := map[string]*api.NodeListStub{}
			var out []Leaving
			var needs admission.CapacityNeeds
			for i := range tc.out {
				id := fmt.Sprintf("out-%03d", i)
				nodes[id] = &api.NodeListStub{ID: id, NodePool: "p", Status: api.NodeStatusReady, Drain: true}
				out = append(out, Leaving{NodeID: id, Draining: true})
				needs.Allocs = append(needs.Allocs, id)
			}
			for i := range tc.candidates {
				id := fmt.Sprintf("cand-%03d", i)
				nodes[id] = &api.NodeListStub{ID: id, NodePool: "p", Status: api.NodeStatusReady,
					SchedulingEligibility: api.NodeSchedulingEligible}
			}
			w := &slowWorld{full: make(chan struct{})}
			r := &Reader{Nodes: w}
			p := r.NewPass(nodes, out, 0, nil)
			if tc.candidates > 0 {
				p.Gate.Read["p"] = tc.candidates / 2 // the next read is all of them
				needs.Pools = []string{"p"}
			}
			r.Read(t.Context(), p, needs)
			if p.Gate.Err != nil {
				t.Fatal(p.Gate.Err)
			}
			if w.infos != tc.infos || w.allocReads != tc.allocReads {
				t.Errorf("%d node and %d allocation reads, want %d and %d", w.infos, w.allocReads, tc.infos, tc.allocReads)
			}
			if w.most != Parallelism {
				t.Errorf("at most %d reads in flight, want %d", w.most, Parallelism)
			}
		})
	}
}

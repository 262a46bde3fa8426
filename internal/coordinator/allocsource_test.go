package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/rejoinwatch"
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
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail() // a pass
	if _, err := c.systemJobs(t.Context(), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := capacityReads(c, "n2"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.allocsOnNode(t.Context(), "n2"); err != nil || len(got) != 1 || got[0].Name != "web.web[0]" {
		t.Fatalf("the capacity gate's read in the same pass: %+v, %v", got, err)
	}
	if q := n.queries(); len(q) != 2 {
		t.Fatalf("queries %v in the pass, want two (n1's and the capacity gate's of n2)", q)
	}

	var pokes atomic.Int32
	w := rejoinwatch.NewAllocs(t.Context(), c.opt.Nodes, &c.mail, func() { pokes.Add(1) })
	defer w.Stop()
	plans := map[string]store.Plan{"h1": {Host: "h1", Phase: store.PhaseRejoining, NodeID: "n1", SystemJobs: []string{"default/agent"}}}
	w.Set(rejoinwatch.AllocNodes(plans, nil), c.allocs.TakeReads())
	select {
	case <-n.blocked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch did not block; queries %v", n.queries())
	}
	if q := n.queries(); len(q) != 3 || q[2] != 7 {
		t.Errorf("queries %v, want the pass's reads and then the watch's from index 7", q)
	}
	c.takeMail()                                   // the next pass
	kept, err := c.allocsOnNode(t.Context(), "n1") // the watch's answer: no read
	if err != nil || len(kept) != 1 || kept[0].Name != "web.web[0]" || pokes.Load() != 0 || len(n.queries()) != 3 {
		t.Errorf("the watch kept %+v (%v) and poked %d passes, queries %v; want the pass's read, none and no new query", kept, err, pokes.Load(), n.queries())
	}
}

// The capacity gate's reads side by side are kept for the watches like its
// single ones, with the index each was answered at.
func TestCapacityReadsAreKept(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail()
	if err := capacityReads(c, "n1", "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if q := n.queries(); len(q) != 2 {
		t.Errorf("queries %v, want one per node", q)
	}
	kept := c.allocs.TakeReads()
	for _, id := range []string{"n1", "n2"} {
		if r, ok := kept[id]; !ok || r.Index != 7 || len(r.Allocs) != 1 {
			t.Errorf("node %s: kept %+v (%v)", id, r, ok)
		}
	}
}

// capacityReads has the capacity gate of c read the allocations of the nodes
// ids, as a pass that asks for them does (readCapacity), with no node listed.
func capacityReads(c *Coordinator, ids ...string) error {
	p := c.capacity.NewPass(nil, nil, 0, nil)
	c.capacity.Read(context.Background(), p, admission.CapacityNeeds{Allocs: ids})
	return p.Gate.Err
}

// allocWorld is a cluster whose nodes' allocations change; reads of them are
// counted by node.
type allocWorld struct {
	NodesAPI
	version map[string]uint64
	reads   map[string]int
}

func (w *allocWorld) allocs(id string) []*api.Allocation {
	return []*api.Allocation{{ID: fmt.Sprintf("%s-%d", id, w.version[id]), NodeID: id}}
}

func (w *allocWorld) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	w.reads[id]++
	return w.allocs(id), &api.QueryMeta{LastIndex: w.version[id]}, nil
}

// The allocations a pass sees of a node are, over a randomly changing world,
// its watch's newest answer as the pass took it while the watch runs, else
// what the pass's first read of the node said (its own or the capacity
// gate's): a look reads only a node the pass did not read yet and no watch
// answered for; and every read is kept, with its index, for the watches the
// loop starts after the pass. The world: allocations changing, watches answering,
// failing and ending, the capacity gate reading, passes.
func TestAllocSourceEqualsFreshReads(t *testing.T) {
	ids := []string{"n0", "n1", "n2", "n3"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 41))
		w := &allocWorld{version: map[string]uint64{}, reads: map[string]int{}}
		for _, id := range ids {
			w.version[id] = 1
		}
		c := New(Options{Deps: Deps{Nodes: w}})
		watched := map[string][]*api.Allocation{} // what each watch last answered
		for pass := range 40 {
			for range rng.IntN(4) { // what happens between two passes
				id := ids[rng.IntN(len(ids))]
				switch rng.IntN(4) {
				case 0:
					w.version[id]++
				case 1: // the watch answers
					watched[id] = w.allocs(id)
					c.mail.SetAllocs(id, watched[id])
				case 2: // the watch fails or ends
					delete(watched, id)
					c.mail.SetAllocs(id, nil)
				}
			}
			c.takeMail()
			clear(w.reads)
			first := map[string][]*api.Allocation{} // what the pass saw first of each node
			for range rng.IntN(8) {
				id := ids[rng.IntN(len(ids))]
				if rng.IntN(3) == 0 { // the capacity gate reads it
					if _, done := first[id]; !done {
						if err := capacityReads(c, id); err != nil {
							t.Fatal(err)
						}
						first[id] = w.allocs(id) // what it read
					}
					continue
				}
				want, ok := watched[id]
				if !ok {
					want, ok = first[id]
				}
				reads := 0 // the reads this look makes
				if !ok {
					want, reads = w.allocs(id), 1
				}
				before := w.reads[id]
				got, err := c.allocsOnNode(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, want, func(a, b *api.Allocation) bool { return a.ID == b.ID }) {
					t.Fatalf("seed %d pass %d: node %s shows %s, want %s", seed, pass, id, got[0].ID, want[0].ID)
				}
				if n := w.reads[id] - before; n != reads {
					t.Fatalf("seed %d pass %d: node %s read %d times, want %d", seed, pass, id, n, reads)
				}
				if _, ok := watched[id]; !ok {
					first[id] = want
				}
				if rng.IntN(3) == 0 {
					w.version[id]++ // a change during the pass: seen by the next one
				}
			}
			reads := c.allocs.TakeReads()
			for id := range w.reads {
				if _, ok := reads[id]; !ok {
					t.Fatalf("seed %d pass %d: the read of node %s is not kept for its watch", seed, pass, id)
				}
			}
			if len(reads) != len(w.reads) {
				t.Fatalf("seed %d pass %d: reads kept %v, made %v", seed, pass, reads, w.reads)
			}
		}
	}
}

package allocsource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// allocWorld is a cluster whose nodes' allocations change; reads of them are
// counted by node.
type allocWorld struct {
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
		src := &Source{Nodes: w}
		watched := map[string][]*api.Allocation{} // what each watch last answered
		for pass := range 40 {
			for range rng.IntN(4) { // what happens between two passes
				id := ids[rng.IntN(len(ids))]
				switch rng.IntN(4) {
				case 0:
					w.version[id]++
				case 1: // the watch answers
					watched[id] = w.allocs(id)
				case 2: // the watch fails or ends
					delete(watched, id)
				}
			}
			src.NewPass(maps.Clone(watched)) // as the pass takes the watches' answers
			clear(w.reads)
			first := map[string][]*api.Allocation{} // what the pass saw first of each node
			for range rng.IntN(8) {
				id := ids[rng.IntN(len(ids))]
				if rng.IntN(3) == 0 { // the capacity gate reads it
					if _, done := first[id]; !done {
						allocs, meta, _ := w.Allocations(id, nil)
						src.Noted(id, meta, allocs)
						first[id] = allocs // what it read
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
				got, err := src.OnNode(t.Context(), id)
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
			reads := src.TakeReads()
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

// failingNodes fails the reads of one node and counts the others, safe for
// reads side by side.
type failingNodes struct {
	mu      sync.Mutex
	reads   map[string]int
	failing string
}

func (n *failingNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads[id]++
	if id == n.failing {
		return nil, nil, errors.New("timeout")
	}
	return []*api.Allocation{{ID: id + "-a", NodeID: id}}, &api.QueryMeta{LastIndex: 3}, nil
}

// An Ahead reads each line's nodes in order, one per ReadNext, none once
// the line is done. What it read is kept as the pass's reads, so that a look
// later in the pass reads it no more; a read that failed is left out and made
// again by the look that needs it.
func TestReadAhead(t *testing.T) {
	n := &failingNodes{reads: map[string]int{}, failing: "bad"}
	s := &Source{Nodes: n}
	s.NewPass(nil)
	ids := []string{"a", "b", "bad", "c", "d", "e", "f", "g", "h", "i"}
	ahead := s.Ahead(context.Background(), map[string][]string{"x": ids[:5], "y": ids[5:], "z": {"unread"}})
	for range 6 {
		ahead.ReadNext("x")
		ahead.ReadNext("y")
	}
	ahead.ReadNext("none")
	ahead.Wait()
	if n.reads["unread"] != 0 {
		t.Error("a line not asked for was read")
	}
	for _, id := range ids {
		got, ok := s.InPass(id)
		if ok != (id != "bad") || ok && (len(got) != 1 || got[0].ID != id+"-a") {
			t.Errorf("InPass(%s) = %v, %v after the reads ahead, want every node but the failing one", id, got, ok)
		}
	}
	for _, id := range ids {
		if _, err := s.OnNode(context.Background(), id); (err != nil) != (id == "bad") {
			t.Errorf("OnNode(%s) err = %v", id, err)
		}
		if want := map[bool]int{true: 2, false: 1}[id == "bad"]; n.reads[id] != want {
			t.Errorf("%s read %d times, want %d", id, n.reads[id], want)
		}
	}
	if reads := s.TakeReads(); len(reads) != len(ids)-1 || reads["c"].Index != 3 {
		t.Errorf("reads kept for the watches %v, want every node read, with its index", reads)
	}
}

// gatedNodes answers each read once released, and counts the reads in flight.
type gatedNodes struct {
	mu            sync.Mutex
	inFlight, max int
	release       chan struct{}
	started       chan struct{}
}

func (n *gatedNodes) Allocations(id string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	n.inFlight++
	n.max = max(n.max, n.inFlight)
	n.mu.Unlock()
	n.started <- struct{}{}
	<-n.release
	n.mu.Lock()
	n.inFlight--
	n.mu.Unlock()
	return []*api.Allocation{{ID: id + "-a", NodeID: id}}, &api.QueryMeta{LastIndex: 1}, nil
}

// An Ahead's reads go ReadAheadParallelism at a time beside the pass's
// writes, and once widened (the writes done) ReadAheadWidened at a time;
// every node asked for is read either way.
func TestReadAheadWidens(t *testing.T) {
	const nodes = 2 * ReadAheadWidened
	n := &gatedNodes{release: make(chan struct{}), started: make(chan struct{}, nodes)}
	s := &Source{Nodes: n}
	s.NewPass(nil)
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%02d", i)
	}
	ahead := s.Ahead(context.Background(), map[string][]string{"g": ids})
	for range nodes {
		ahead.ReadNext("g")
	}
	for range ReadAheadParallelism {
		<-n.started
	}
	select {
	case <-n.started:
		t.Fatalf("more than %d reads in flight before Widen", ReadAheadParallelism)
	case <-time.After(50 * time.Millisecond):
	}
	ahead.Widen()
	ahead.Widen() // once only
	for range ReadAheadWidened - ReadAheadParallelism {
		<-n.started // blocks, and the test times out, unless the bound widened
	}
	close(n.release)
	ahead.Wait()
	if got := s.TakeReads(); len(got) != nodes {
		t.Errorf("read %d nodes, want %d", len(got), nodes)
	}
	if n.max != ReadAheadWidened {
		t.Errorf("at most %d reads in flight once widened, want %d", n.max, ReadAheadWidened)
	}
}

// heldNodes answers the reads of the nodes in held once released, the others
// at once.
type heldNodes struct {
	held    map[string]bool
	release chan struct{}
}

func (n heldNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	if n.held[id] {
		<-n.release
	}
	return []*api.Allocation{{ID: id + "-a", NodeID: id}}, &api.QueryMeta{LastIndex: 1}, nil
}

// WaitFor waits for the reads of the lines it names only: a hand-out of one
// group's slot does not wait for a slow read of another's, and finds its own
// line's read as the pass's.
func TestReadAheadWaitsForItsLines(t *testing.T) {
	n := heldNodes{held: map[string]bool{"slow": true}, release: make(chan struct{})}
	s := &Source{Nodes: n}
	s.NewPass(nil)
	ahead := s.Ahead(context.Background(), map[string][]string{"x": {"fast"}, "y": {"slow"}})
	ahead.ReadNext("y")
	ahead.ReadNext("x")
	waited := make(chan struct{})
	go func() { ahead.WaitFor("x"); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("WaitFor(x) waited for line y's read")
	}
	if _, ok := s.InPass("fast"); !ok {
		t.Error("line x's read is not the pass's once WaitFor(x) returned")
	}
	if _, ok := s.InPass("slow"); ok {
		t.Error("line y's read ended before it was released")
	}
	go func() { time.Sleep(20 * time.Millisecond); close(n.release) }()
	ahead.WaitFor("x", "y")
	if _, ok := s.InPass("slow"); !ok {
		t.Error("WaitFor(x, y) returned before line y's read ended")
	}
}

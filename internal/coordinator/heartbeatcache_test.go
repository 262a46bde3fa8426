package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/heartbeatread"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// infoNodes answers Info with node and counts the reads.
type infoNodes struct {
	NodesAPI
	reads int
	node  *api.Node
}

func (n *infoNodes) Info(string, *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.reads++
	return n.node, &api.QueryMeta{LastIndex: n.node.ModifyIndex}, nil
}

// A node's heartbeat indexes are read again only when its ModifyIndex moved,
// and forgotten once a pass no longer asks for them.
func TestHeartbeatIndexesReadOnChange(t *testing.T) {
	n := &infoNodes{node: &api.Node{ID: "n1", ModifyIndex: 10, Events: []*api.NodeEvent{
		{Message: heartbeatread.EventHeartbeatMissed, CreateIndex: 8}, {Message: heartbeatread.EventReregisteredByHeartbeat, CreateIndex: 10}}}}
	c := New(Options{Deps: Deps{Nodes: n}})
	pass := func(modifyIndex uint64) *phase.NodeView {
		t.Helper()
		v := &phase.NodeView{ID: "n1", ModifyIndex: modifyIndex}
		if err := c.readHeartbeats(t.Context(), []*phase.NodeView{v})[0]; err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := pass(10); n.reads != 1 || v.MissedHeartbeatIndex != 8 || v.ReregisteredIndex != 10 {
		t.Fatalf("first pass: %d reads, %+v", n.reads, v)
	}
	if v := pass(10); n.reads != 1 || v.MissedHeartbeatIndex != 8 || v.ReregisteredIndex != 10 {
		t.Fatalf("node unchanged: %d reads, want 1; %+v", n.reads, v)
	}
	n.node = &api.Node{ID: "n1", ModifyIndex: 12, Events: append(n.node.Events, &api.NodeEvent{Message: heartbeatread.EventHeartbeatMissed, CreateIndex: 12})}
	if v := pass(12); n.reads != 2 || v.MissedHeartbeatIndex != 12 {
		t.Fatalf("node changed: %d reads, want 2; %+v", n.reads, v)
	}
	c.readHeartbeats(t.Context(), nil) // a pass that did not ask for it
	if pass(12); n.reads != 3 {
		t.Fatalf("after a pass without it: %d reads, want 3", n.reads)
	}
}

// eventWorld is a cluster whose nodes get events (each with a write to the
// node, which moves its ModifyIndex) and other writes; reads are counted by
// node.
type eventWorld struct {
	NodesAPI
	mu    sync.Mutex // the reads run side by side
	nodes map[string]*api.Node
	reads map[string]int
}

func (w *eventWorld) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads[id]++
	n := *w.nodes[id]
	n.Events = slices.Clone(n.Events)
	return &n, &api.QueryMeta{LastIndex: n.ModifyIndex}, nil
}

// The heartbeat indexes a pass finds are, over a randomly changing world, those
// of a read of each node now; a node is read only when the pass before did not
// find it at the ModifyIndex the list shows now; and what is kept is what the
// last pass found, and nothing else. The world: nodes missing heartbeats,
// coming back, changing eligibility, finishing drains, written without an
// event; passes asking for some of them, with a read that sometimes fails.
func TestHeartbeatIndexesEqualFreshReads(t *testing.T) {
	messages := []string{heartbeatread.EventHeartbeatMissed, heartbeatread.EventReregisteredByHeartbeat, heartbeatread.EventReregistered, heartbeatread.EventMarkedEligible,
		heartbeatread.EventMarkedIneligible, heartbeatread.EventDrainComplete, "Node registered"}
	ids := []string{"n0", "n1", "n2", "n3", "n4"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 43))
		w := &eventWorld{nodes: map[string]*api.Node{}, reads: map[string]int{}}
		index := uint64(1)
		for _, id := range ids {
			w.nodes[id] = &api.Node{ID: id, ModifyIndex: index}
		}
		failing := &failingInfo{eventWorld: w}
		c := New(Options{Deps: Deps{Nodes: failing}})
		found := map[string]uint64{} // what the last pass found: the index of each node
		for pass := range 40 {
			for range rng.IntN(4) {
				n := w.nodes[ids[rng.IntN(len(ids))]]
				index++
				if rng.IntN(3) > 0 {
					n.Events = append(n.Events, &api.NodeEvent{Message: messages[rng.IntN(len(messages))], CreateIndex: index})
				}
				n.ModifyIndex = index // every write to a node moves it
			}
			var views []*phase.NodeView
			for _, id := range ids {
				if rng.IntN(2) == 0 {
					views = append(views, &phase.NodeView{ID: id, ModifyIndex: w.nodes[id].ModifyIndex})
				}
			}
			failing.fail = ""
			if len(views) > 0 && rng.IntN(6) == 0 {
				failing.fail = views[rng.IntN(len(views))].ID
			}
			clear(w.reads)
			errs := c.readHeartbeats(t.Context(), views)
			kept := map[string]uint64{}
			for i, v := range views {
				at, ok := found[v.ID]
				wantRead := !ok || at != v.ModifyIndex
				if got := w.reads[v.ID] > 0; got != wantRead {
					t.Fatalf("seed %d pass %d: node %s read %v, want %v", seed, pass, v.ID, got, wantRead)
				}
				if errs[i] != nil {
					if v.ID != failing.fail || !wantRead {
						t.Fatalf("seed %d pass %d: node %s: %v", seed, pass, v.ID, errs[i])
					}
					continue
				}
				want := heartbeatread.Of(w.nodes[v.ID])
				got := heartbeatIndexes{Reregistered: v.ReregisteredIndex, Missed: v.MissedHeartbeatIndex,
					Eligibility: v.EligibilityIndex, DrainDone: v.DrainDoneIndex}
				if got != want {
					t.Fatalf("seed %d pass %d: node %s shows %+v, want %+v", seed, pass, v.ID, got, want)
				}
				kept[v.ID] = v.ModifyIndex
			}
			found = kept
			if c.heartbeats.Len() != len(found) {
				t.Fatalf("seed %d pass %d: %d nodes kept, want those found: %v", seed, pass, c.heartbeats.Len(), found)
			}
		}
	}
}

// failingInfo fails the reads of node fail.
type failingInfo struct {
	*eventWorld
	fail string
}

func (f *failingInfo) Info(id string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n, meta, err := f.eventWorld.Info(id, q)
	if id == f.fail {
		return nil, nil, errInjected
	}
	return n, meta, err
}

// barrierNodes answers Info only once want reads are in flight together (or
// after a while, with an error): reads sent one after the other fail.
type barrierNodes struct {
	NodesAPI
	want    int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (n *barrierNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.mu.Lock()
	if n.arrived++; n.arrived == n.want {
		close(n.all)
	}
	n.mu.Unlock()
	select {
	case <-n.all:
		return &api.Node{ID: id, ModifyIndex: 5}, &api.QueryMeta{LastIndex: 5}, nil
	case <-time.After(2 * time.Second):
		return nil, nil, errors.New("read alone: the others were not sent beside it")
	}
}

// The events of the nodes of hosts that should be rebooting are read side by
// side: a pass mid-rollout reads one per node that changed.
func TestNodeEventsReadSideBySide(t *testing.T) {
	const hosts = 3
	n := &barrierNodes{want: hosts, all: make(chan struct{})}
	c := New(Options{Deps: Deps{Nodes: n}})
	s := &snapshot{plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
	for i := range hosts {
		name := fmt.Sprintf("h%d", i)
		s.plans[name] = store.Plan{Host: name, Phase: store.PhaseRebooting}
		s.hosts[name] = &hostView{node: &phase.NodeView{ID: "n-" + name, ModifyIndex: 5}}
	}
	s.names = slices.Sorted(maps.Keys(s.hosts))
	s.listBusy()
	c.readNodeDetails(t.Context(), s)
	if n.arrived != hosts {
		t.Errorf("%d node reads, want %d", n.arrived, hosts)
	}
	for name, hv := range s.hosts {
		if hv.err != nil {
			t.Errorf("%s: %v", name, hv.err)
		}
	}
}

// A node the node follower saw in full (the event stream's payload is the
// whole node) gives a pass its heartbeat indexes at that ModifyIndex without a
// read; at another ModifyIndex the node is read.
func TestHeartbeatIndexesFromTheFollower(t *testing.T) {
	n := &infoNodes{node: &api.Node{ID: "n1", ModifyIndex: 12, Events: []*api.NodeEvent{
		{Message: heartbeatread.EventHeartbeatMissed, CreateIndex: 12}}}}
	c := New(Options{Deps: Deps{Nodes: n}})
	nodeSink{&c.mail}.NodesWritten([]*api.Node{{ID: "n1", ModifyIndex: 10, Events: []*api.NodeEvent{
		{Message: heartbeatread.EventHeartbeatMissed, CreateIndex: 8}, {Message: heartbeatread.EventReregisteredByHeartbeat, CreateIndex: 10}}}})
	c.takeMail() // a pass
	v := &phase.NodeView{ID: "n1", ModifyIndex: 10}
	if err := c.readHeartbeats(t.Context(), []*phase.NodeView{v})[0]; err != nil {
		t.Fatal(err)
	}
	if n.reads != 0 || v.MissedHeartbeatIndex != 8 || v.ReregisteredIndex != 10 {
		t.Fatalf("seen in full at its ModifyIndex: %d reads, want none; %+v", n.reads, v)
	}
	c.takeMail()
	v = &phase.NodeView{ID: "n1", ModifyIndex: 12}
	if err := c.readHeartbeats(t.Context(), []*phase.NodeView{v})[0]; err != nil {
		t.Fatal(err)
	}
	if n.reads != 1 || v.MissedHeartbeatIndex != 12 {
		t.Fatalf("not seen at its ModifyIndex: %d reads, want 1; %+v", n.reads, v)
	}
}

// allocInfoNodes is infoNodes whose nodes have no allocations.
type allocInfoNodes struct{ *infoNodes }

func (allocInfoNodes) Allocations(string, *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{LastIndex: 1}, nil
}

// A node the node follower saw in full gives the capacity gate its resources
// at that ModifyIndex without a read of the node; at another it is read.
func TestCapacityFromTheFollower(t *testing.T) {
	n := &infoNodes{node: &api.Node{ID: "n1", Name: "n1", NodePool: "default", ModifyIndex: 12,
		NodeResources: &api.NodeResources{Memory: api.NodeMemoryResources{MemoryMB: 4096}}}}
	c := New(Options{Deps: Deps{Nodes: allocInfoNodes{n}}})
	streamed := *n.node
	streamed.ModifyIndex, streamed.NodeResources = 10, &api.NodeResources{Memory: api.NodeMemoryResources{MemoryMB: 2048}}
	nodeSink{&c.mail}.NodesWritten([]*api.Node{&streamed})
	gate := func(modifyIndex uint64) int64 {
		t.Helper()
		c.takeMail() // a pass
		list := map[string]*api.NodeListStub{"n1": {ID: "n1", Name: "n1", NodePool: "default", Status: api.NodeStatusReady,
			SchedulingEligibility: api.NodeSchedulingEligible, ModifyIndex: modifyIndex}}
		p := c.capacity.NewPass(list, nil, 0, nil)
		c.capacity.Read(t.Context(), p, admission.CapacityNeeds{Pools: []string{"default"}})
		if p.Gate.Err != nil {
			t.Fatal(p.Gate.Err)
		}
		return p.Gate.Nodes["n1"].Capacity.MemoryMB
	}
	if mb := gate(10); n.reads != 0 || mb != 2048 {
		t.Fatalf("seen in full at its ModifyIndex: %d reads, want none; %d MB, want 2048", n.reads, mb)
	}
	if mb := gate(12); n.reads != 1 || mb != 4096 {
		t.Fatalf("not seen at its ModifyIndex: %d reads, want 1; %d MB, want 4096", n.reads, mb)
	}
}

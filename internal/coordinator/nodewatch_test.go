package coordinator

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/heartbeatread"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watched"
)

// The follower keeps, from one list and the event stream, the node list a
// blocking query would answer: after an eligibility change, a drain, a meta
// change and a reboot (down, then ready again), its list is the emulator's
// own, stub for stub, and it listed the nodes once.
func TestNodeListFromEvents(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 3, HeartbeatTTL: 300 * time.Millisecond, BootTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	lists := &nodeLists{base: http.DefaultTransport}
	client, err := api.NewClient(&api.Config{Address: sim.Address(), HttpClient: &http.Client{Transport: lists}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	plain, err := api.NewClient(&api.Config{Address: sim.Address()}) // its lists are not counted
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	co := New(Options{
		Deps: Deps{
			Nodes:      client.Nodes(),
			NodeEvents: nodestream.NomadNodeEvents{Client: client},
			Store:      store.New(client.Variables(), "rollboot", ""),
		},
		Runtime: Runtime{Resync: time.Hour},
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var pokes atomic.Int64
	go func() {
		defer close(done)
		co.newNodeFollower(func() { pokes.Add(1) }).Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	same := func(what string, at uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			list, idx := mailedNodes(co)
			if list != nil && idx >= at {
				want, _, err := plain.Nodes().List(nil)
				if err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(list)
				b, _ := json.Marshal(want)
				if string(a) == string(b) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the followed list (index %d) is not the node list at index %d or later", what, idx, at)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	same("at the start", 1)
	lists.take()
	h1, _ := sim.Host("client-1")
	h2, _ := sim.Host("client-2")
	h3, _ := sim.Host("client-3")
	e, err := plain.Nodes().ToggleEligibility(h1.NodeID, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	same("after an eligibility change", e.NodeModifyIndex)
	d, err := plain.Nodes().UpdateDrainOpts(h2.NodeID, &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	same("after a drain", d.NodeModifyIndex)
	if err := sim.SetNodeMeta("client-3", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	same("after a meta change", sim.Index())
	if err := sim.Reboot("client-3"); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel2()
	if err := sim.WaitFor(ctx2, func(v *nomadsim.View) bool {
		n, ok := v.Node(h3.NodeID)
		return ok && n.Status == api.NodeStatusReady && n.Events[len(n.Events)-1].Message == heartbeatread.EventReregisteredByHeartbeat
	}); err != nil {
		t.Fatal(err)
	}
	same("after a reboot", sim.Index())
	if got := lists.take(); slices.Contains(got, "") {
		t.Errorf("the follower listed the nodes again after the first list (%q)", got)
	}
	if pokes.Load() < 4 {
		t.Errorf("%d pokes, want one per change at least", pokes.Load())
	}
}

// mailedNodes returns the node list in co's mailbox, and its index.
func mailedNodes(co *Coordinator) ([]*api.NodeListStub, uint64) {
	var n watched.Value[[]*api.NodeListStub]
	co.mail.Read(func(a *answers, _ bool) { n = a.nodes })
	return n.Val, n.Index
}

// A pass after a node write of its own waits for the watch to show it, and
// reads the list itself when it does not come in time.
func TestMailboxNodesCaughtUp(t *testing.T) {
	var m mailbox
	if _, ok := m.caughtUp(t.Context(), 0, time.Second); ok {
		t.Fatal("no list: caught up")
	}
	old := []*api.NodeListStub{{ID: "a", ModifyIndex: 5}}
	m.setNodes(old, 5)
	if _, ok := m.caughtUp(t.Context(), 7, 20*time.Millisecond); ok {
		t.Fatal("the watch did not catch up, yet the list was taken")
	}
	fresh := []*api.NodeListStub{{ID: "a", ModifyIndex: 7}}
	go func() {
		m.setNodes([]*api.NodeListStub{{ID: "a", ModifyIndex: 6}}, 6) // not yet
		time.Sleep(20 * time.Millisecond)
		m.setNodes(fresh, 7)
	}()
	if got, ok := m.caughtUp(t.Context(), 7, 10*time.Second); !ok || len(got.Val) != 1 || got.Val[0].ModifyIndex != 7 {
		t.Fatalf("caught up: got %v (%v), want the list at 7", got.Val, ok)
	}
	m.setNodes([]*api.NodeListStub{{ID: "a", ModifyIndex: 6}}, 6) // an answer older than the kept one
	if got, _ := m.caughtUp(t.Context(), 0, time.Second); got.Index != 7 {
		t.Fatalf("an older answer replaced the list at 7: %d", got.Index)
	}
}

// listNodes answers List with list at index.
type listNodes struct {
	NodesAPI
	list  []*api.NodeListStub
	index uint64
}

func (n *listNodes) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return n.list, &api.QueryMeta{LastIndex: n.index}, nil
}

type chanEvents chan *api.Events

func (c chanEvents) NodeEvents(context.Context, uint64) (<-chan *api.Events, error) { return c, nil }

// Items at or before the list's index are in the list and skipped; every item
// after it is applied, two at one index included.
func TestFollowNodesSkipsOnlyWhatTheListHas(t *testing.T) {
	nodeEvent := func(id string, idx uint64) api.Event {
		return api.Event{Topic: api.TopicNode, Type: "NodeDrain", Key: id, Index: idx,
			Payload: map[string]any{"Node": map[string]any{"ID": id, "Status": "ready", "ModifyIndex": idx}}}
	}
	events := make(chanEvents, 4)
	events <- &api.Events{Index: 5, Events: []api.Event{nodeEvent("a", 5)}} // replayed: in the list
	events <- &api.Events{Index: 6, Events: []api.Event{nodeEvent("a", 6)}}
	events <- &api.Events{Index: 6, Events: []api.Event{nodeEvent("b", 6)}}
	nodes := &listNodes{list: []*api.NodeListStub{{ID: "a", ModifyIndex: 5}, {ID: "b", ModifyIndex: 2}}, index: 5}
	co := New(Options{Deps: Deps{Nodes: nodes, NodeEvents: events}, Runtime: Runtime{Resync: time.Hour}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); co.newNodeFollower(func() {}).Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, idx := mailedNodes(co)
		if idx == 6 && len(list) == 2 && list[0].ModifyIndex == 6 && list[1].ModifyIndex == 6 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("list at %d: %+v %+v, want both nodes at 6", idx, list[0], list[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

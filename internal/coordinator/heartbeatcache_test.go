package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

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
		{Message: eventHeartbeatMissed, CreateIndex: 8}, {Message: eventReregisteredByHeartbeat, CreateIndex: 10}}}}
	c := New(Options{Nodes: n})
	pass := func(modifyIndex uint64) *phase.NodeView {
		t.Helper()
		v := &phase.NodeView{ID: "n1", ModifyIndex: modifyIndex}
		if err := c.reregisteredIndex(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		c.heartbeats.passDone()
		return v
	}
	if v := pass(10); n.reads != 1 || v.MissedHeartbeatIndex != 8 || v.ReregisteredIndex != 10 {
		t.Fatalf("first pass: %d reads, %+v", n.reads, v)
	}
	if v := pass(10); n.reads != 1 || v.MissedHeartbeatIndex != 8 || v.ReregisteredIndex != 10 {
		t.Fatalf("node unchanged: %d reads, want 1; %+v", n.reads, v)
	}
	n.node = &api.Node{ID: "n1", ModifyIndex: 12, Events: append(n.node.Events, &api.NodeEvent{Message: eventHeartbeatMissed, CreateIndex: 12})}
	if v := pass(12); n.reads != 2 || v.MissedHeartbeatIndex != 12 {
		t.Fatalf("node changed: %d reads, want 2; %+v", n.reads, v)
	}
	c.heartbeats.passDone() // a pass that did not ask for it
	if pass(12); n.reads != 3 {
		t.Fatalf("after a pass without it: %d reads, want 3", n.reads)
	}
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
	c := New(Options{Nodes: n})
	s := &snapshot{plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
	for i := range hosts {
		name := fmt.Sprintf("h%d", i)
		s.plans[name] = store.Plan{Host: name, Phase: store.PhaseRebooting}
		s.hosts[name] = &hostView{node: &phase.NodeView{ID: "n-" + name, ModifyIndex: 5}}
	}
	s.names = sortedKeys(s.hosts)
	c.readNodeDetails(t.Context(), s)
	for name, hv := range s.hosts {
		if hv.err != nil {
			t.Errorf("%s: %v", name, hv.err)
		}
	}
}

package coordinator

import (
	"context"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
)

// eventsNodes is a NodesAPI whose Info returns a node with the given events; the
// other calls are not used here.
type eventsNodes struct {
	NodesAPI
	events []*api.NodeEvent
}

func (f eventsNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	return &api.Node{ID: id, Events: f.events}, &api.QueryMeta{}, nil
}

func TestReregisteredIndexReadsEveryNomadMessage(t *testing.T) {
	ev := func(msg string, idx uint64) *api.NodeEvent { return &api.NodeEvent{Message: msg, CreateIndex: idx} }
	tests := []struct {
		name          string
		events        []*api.NodeEvent
		rereg, missed uint64
	}{
		{name: "registered only", events: []*api.NodeEvent{ev("Node registered", 5)}},
		{
			name:   "down and back (Nomad >= 1.5)",
			events: []*api.NodeEvent{ev("Node registered", 5), ev("Node heartbeat missed", 40), ev("Node reregistered by heartbeat", 48)},
			rereg:  48, missed: 40,
		},
		{
			name:   "down and back (before 1.5)",
			events: []*api.NodeEvent{ev("Node heartbeat missed", 40), ev("Node re-registered", 45)},
			rereg:  45, missed: 40,
		},
		{
			name:   "disconnected and back: no re-registration event",
			events: []*api.NodeEvent{ev("Node drain complete", 30), ev("Node heartbeat missed", 40), ev("Node heartbeat missed", 52)},
			missed: 52,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{Deps: Deps{Nodes: eventsNodes{events: tt.events}}})
			v := &phase.NodeView{ID: "n1"}
			if err := c.readHeartbeats(context.Background(), []*phase.NodeView{v})[0]; err != nil {
				t.Fatal(err)
			}
			if v.ReregisteredIndex != tt.rereg || v.MissedHeartbeatIndex != tt.missed {
				t.Errorf("reregistered %d, missed %d; want %d, %d", v.ReregisteredIndex, v.MissedHeartbeatIndex, tt.rereg, tt.missed)
			}
		})
	}
}

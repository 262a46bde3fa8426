package coordinator

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// The pass tells a cycle's node gone from the node list it read: purged,
// replaced by a newer node of the host's name, or still the host's.
func TestSnapshotNodeGone(t *testing.T) {
	stub := func(id, name, status string, created uint64) *api.NodeListStub {
		return &api.NodeListStub{ID: id, Name: name, Status: status, CreateIndex: created}
	}
	tests := []struct {
		name  string
		nodes []*api.NodeListStub
		plan  store.Plan
		want  string // a part of the reason; "" for none
	}{
		{name: "listed, ready", nodes: []*api.NodeListStub{stub("n1", "h1", "ready", 1)},
			plan: store.Plan{Host: "h1", Phase: store.PhaseRebooting, NodeID: "n1"}},
		{name: "down for its reboot", nodes: []*api.NodeListStub{stub("n1", "h1", "down", 1)},
			plan: store.Plan{Host: "h1", Phase: store.PhaseRebooting, NodeID: "n1"}},
		{name: "purged", nodes: []*api.NodeListStub{stub("n2", "h2", "ready", 1)},
			plan: store.Plan{Host: "h1", Phase: store.PhaseRebooting, NodeID: "n1"}, want: "purged"},
		{name: "replaced", nodes: []*api.NodeListStub{stub("n1", "h1", "down", 1), stub("n3", "h1", "ready", 9)},
			plan: store.Plan{Host: "h1", Phase: store.PhaseStuck, NodeID: "n1"}, want: "belongs to node n3"},
		{name: "not out of service", nodes: nil,
			plan: store.Plan{Host: "h1", Phase: store.PhasePending, NodeID: "n1"}},
		{name: "no node drained", nodes: nil,
			plan: store.Plan{Host: "h1", Phase: store.PhaseRebooting}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &snapshot{nodes: map[string]*api.NodeListStub{}}
			for _, n := range tt.nodes {
				s.nodes[n.ID] = n
			}
			got := s.nodeGone(tt.plan)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("nodeGone = %q, want %q", got, tt.want)
			}
		})
	}
}

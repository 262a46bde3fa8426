package nomadsim

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The request figures count each route by method and pattern, with a node's
// endpoint after its ID, and never an ID or a variable's path.
func TestRequestStatsByRoute(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	n, _ := s.Node("client-1")
	s.ResetRequestStats()
	if _, _, err := c.Nodes().Allocations(n.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Nodes().Info(n.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Variables().Create(&api.Variable{Path: "rollboot/x", Items: api.VariableItems{"k": "v"}}, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, r := range s.RequestStats().Routes {
		got[r.Route] = r.Requests
	}
	for _, want := range []string{"GET /v1/node/:id/allocations", "GET /v1/node/:id", "PUT /v1/var/..."} {
		if got[want] != 1 {
			t.Errorf("route %q: %d requests, want 1 (all: %v)", want, got[want], got)
		}
	}
}

package nomadsim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/syncbuf"
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

// The requests a host's own listener served are counted apart in each route
// (Local: the agents' share in the demo and the bench), and the variable
// requests again by folder, never by a variable's own name.
func TestRequestStatsLocalAndVariables(t *testing.T) {
	s, c, local := simWithHostClient(t)
	s.ResetRequestStats()
	for _, p := range []string{"rollboot/plan/a", "rollboot/plan/b"} {
		if _, _, err := c.Variables().Create(&api.Variable{Path: p, Items: api.VariableItems{"k": "v"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := local.Variables().Read("rollboot/plan/a", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Variables().PrefixList("rollboot/plan/", nil); err != nil {
		t.Fatal(err)
	}
	st := s.RequestStats()
	routes := map[string]RouteStats{}
	for _, r := range st.Routes {
		routes[r.Route] = r
	}
	if r := routes["GET /v1/var/..."]; r.Requests != 1 || r.Local != 1 {
		t.Errorf("GET /v1/var/...: %+v, want 1 request, 1 local", r)
	}
	if r := routes["PUT /v1/var/..."]; r.Requests != 2 || r.Local != 0 {
		t.Errorf("PUT /v1/var/...: %+v, want 2 requests, none local", r)
	}
	vars := map[string]uint64{}
	for _, v := range st.Variables {
		vars[v.Route] = v.Requests
	}
	want := map[string]uint64{"PUT rollboot/plan/*": 2, "GET rollboot/plan/*": 1, "LIST rollboot/plan/": 1}
	if !maps.Equal(vars, want) {
		t.Errorf("variables %v, want %v", vars, want)
	}
}

// Config.RequestLog gets a line per request: who served it, its method and
// path, and a blocking query's index.
func TestRequestLog(t *testing.T) {
	var log syncbuf.Buffer
	s, c := newTestSim(t, Config{Clients: 1, RequestLog: &log})
	h, _ := s.Host("client-1")
	if _, _, err := c.Nodes().Info(h.NodeID, &api.QueryOptions{WaitIndex: 1, WaitTime: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	local := newClient(t, "http://"+h.Addr, "")
	if _, _, err := local.Variables().Create(&api.Variable{Path: "rollboot/x", Items: api.VariableItems{"k": "v"}}, nil); err != nil {
		t.Fatal(err)
	}
	got := log.String()
	for _, want := range []string{" cluster GET /v1/node/" + h.NodeID + " index=1\n", " client-1 PUT /v1/var/rollboot/x\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log has no line ending %q:\n%s", want, got)
		}
	}
}

// A blocking query whose wait runs out with no change is counted as run out
// (an idle watch's renewal), in the total and in its route, its host's share
// apart; one a write answers, or a read that does not block, is not.
func TestRequestStatsRanOut(t *testing.T) {
	s, c, local := simWithHostClient(t)
	_, meta, err := c.Variables().Create(&api.Variable{Path: "rollboot/plan/a", Items: api.VariableItems{"k": "v"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ResetRequestStats()
	if _, _, err := local.Variables().Read("rollboot/plan/a", &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.Variables().Read("rollboot/plan/a", &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute})
		answered <- err
	}()
	for {
		if sleeping, _ := s.WatchStats(); sleeping == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, err := c.Variables().Update(&api.Variable{Path: "rollboot/plan/a", Items: api.VariableItems{"k": "w"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	st := s.RequestStats()
	if st.Requests != 3 || st.RanOut != 1 {
		t.Errorf("%d requests, %d run out; want 3 and 1 (the read the write answered is not)", st.Requests, st.RanOut)
	}
	for _, r := range st.Routes {
		if r.Route == "GET /v1/var/..." && (r.Requests != 2 || r.RanOut != 1 || r.LocalRanOut != 1) {
			t.Errorf("GET /v1/var/...: %+v, want 2 requests, 1 run out, on the host's listener", r)
		}
	}
}

// simWithHostClient is an emulator of one client host, a client of its
// cluster address, and one of the host's own listener (an agent's).
func simWithHostClient(t *testing.T) (*Sim, *api.Client, *api.Client) {
	t.Helper()
	s, c := newTestSim(t, Config{Clients: 1})
	h, ok := s.Host("client-1")
	if !ok {
		t.Fatal("no host client-1")
	}
	return s, c, newClient(t, "http://"+h.Addr, "")
}

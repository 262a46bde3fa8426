package discovery

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/health/healthtest"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// agentServerToken mints a token from the shipped policy of server hosts'
// agents, which holds node:read and no agent rule.
func agentServerToken(t *testing.T, sim *nomadsim.Sim) string {
	t.Helper()
	path := filepath.Join("..", "..", "deploy", "acl", "rollboot-agent-server.policy.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := nomadsim.ParsePolicy(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return sim.CreateToken("agent-server", p).SecretID
}

// The Nomad role with the server hosts' agent token: the local agent's health
// says what runs, the node of the host's name is its node, and a server's own
// Serf member gives its Raft ID and region. Without a leader, a server's
// health is a 500 that still says it runs a server, and its own member still
// answers.
func TestDiscoverNomadWithTheAgentServerToken(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Servers: 2, Clients: 1, ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if _, err := sim.AddHost("both-1", true, true, ""); err != nil {
		t.Fatal(err)
	}
	tok := agentServerToken(t, sim)
	check := func(when string, h nomadsim.Host) {
		t.Helper()
		local := Local{Host: h.Name, Nomad: healthtest.NomadClient(t, "http://"+h.Addr, tok)}
		r, err := Discover(healthtest.Ctx(t), local)
		if err != nil {
			t.Fatalf("%s: %s: %v", when, h.Name, err)
		}
		if r.NomadNodeID != h.NodeID {
			t.Errorf("%s: %s: node %q, want %q", when, h.Name, r.NomadNodeID, h.NodeID)
		}
		switch {
		case h.Server == nil && r.Nomad != nil:
			t.Errorf("%s: %s: a Nomad server on a client: %+v", when, h.Name, r.Nomad)
		case h.Server != nil && (r.Nomad == nil || r.Nomad.ID != h.Server.ID || r.Nomad.Name != h.Server.Name ||
			r.Nomad.Cluster != "global" || r.Nomad.Product != health.Nomad || r.Nomad.Detail != ""):
			t.Errorf("%s: %s: nomad role %+v, want ID %s", when, h.Name, r.Nomad, h.Server.ID)
		}
	}
	for _, h := range sim.Hosts() {
		check("with a leader", h)
	}
	both, _ := sim.Host("both-1")
	if names := mustDiscover(t, both, tok).Names(); !slices.Equal(names, []string{store.RoleNomadClient, store.RoleNomadServer}) {
		t.Errorf("both-1: names %v", names)
	}
	if err := sim.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	for _, h := range sim.Hosts() {
		check("without a leader", h)
	}
}

func mustDiscover(t *testing.T, h nomadsim.Host, token string) Roles {
	t.Helper()
	r, err := Discover(healthtest.Ctx(t), Local{Host: h.Name, Nomad: healthtest.NomadClient(t, "http://"+h.Addr, token)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A client whose node cannot be found by the host's name, or with no host name
// at all, is an error, never "no client here"; so is a token without node:read.
func TestDiscoverNomadFailsClosed(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 1, ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	h := sim.Hosts()[0]
	c := healthtest.NomadClient(t, "http://"+h.Addr, sim.ManagementToken())
	for _, tc := range []struct {
		name, host, want string
		nomad            *nomadapi.Client
	}{
		{"renamed", h.Name + "-x", `no Nomad node is named "client-1-x"`, c},
		{"no host name", "", "no host name", c},
		{"no node:read", h.Name, "403", healthtest.NomadClient(t, "http://"+h.Addr, sim.CreateToken("none").SecretID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Discover(healthtest.Ctx(t), Local{Host: tc.host, Nomad: tc.nomad})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("roles %+v, err %v; want an error with %q", r, err, tc.want)
			}
		})
	}
}

// Of several nodes of the host's name, the one not down, then the newest.
func TestPickHostNode(t *testing.T) {
	n := func(id, name, status string, created uint64) *nomadapi.NodeListStub {
		return &nomadapi.NodeListStub{ID: id, Name: name, Status: status, CreateIndex: created}
	}
	tests := []struct {
		name  string
		stubs []*nomadapi.NodeListStub
		want  string
	}{
		{"none", nil, ""},
		{"another name only", []*nomadapi.NodeListStub{n("a", "web-10", "ready", 5)}, ""},
		{"one", []*nomadapi.NodeListStub{n("a", "web-1", "ready", 5)}, "a"},
		{"one, down", []*nomadapi.NodeListStub{n("a", "web-1", "down", 5)}, "a"},
		{"the old one down", []*nomadapi.NodeListStub{n("old", "web-1", "down", 9), n("new", "web-1", "initializing", 3)}, "new"},
		{"both up: the newest", []*nomadapi.NodeListStub{n("new", "web-1", "ready", 9), n("old", "web-1", "ready", 3)}, "new"},
		{"both down: the newest", []*nomadapi.NodeListStub{n("old", "web-1", "down", 3), n("new", "web-1", "down", 9)}, "new"},
		{"disconnected is not down", []*nomadapi.NodeListStub{n("a", "web-1", "disconnected", 3), n("b", "web-1", "down", 9)}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if n := pickHostNode(tc.stubs, "web-1"); n != nil {
				got = n.ID
			}
			if got != tc.want {
				t.Errorf("pickHostNode = %q, want %q", got, tc.want)
			}
		})
	}
}

// With what the local Nomad agent runs already known (the agent's Identity at
// its start), discovery does not ask its health or the node list again: a
// client host asks nothing of Nomad, a server host only its own Serf member,
// and the roles are those Discover finds.
func TestDiscoverKnowingAsksNomadLess(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Servers: 1, Clients: 1, ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if _, err := sim.AddHost("both-1", true, true, ""); err != nil {
		t.Fatal(err)
	}
	tok := agentServerToken(t, sim)
	for _, h := range sim.Hosts() {
		local := Local{Host: h.Name, Nomad: healthtest.NomadClient(t, "http://"+h.Addr, tok)}
		want, err := Discover(healthtest.Ctx(t), local)
		if err != nil {
			t.Fatal(err)
		}
		self := NomadSelf{Client: h.NodeID != "", Server: h.Server != nil, NodeID: h.NodeID}
		sim.ResetRequestStats()
		got, err := DiscoverKnowing(healthtest.Ctx(t), local, &self)
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if !slices.Equal(got.Names(), want.Names()) || got.NomadNodeID != want.NomadNodeID ||
			(want.Nomad == nil) != (got.Nomad == nil) || (want.Nomad != nil && *got.Nomad != *want.Nomad) {
			t.Errorf("%s: roles %+v, want %+v", h.Name, got, want)
		}
		wantReqs := uint64(0)
		if h.Server != nil {
			wantReqs = 1 // GET /v1/agent/members
		}
		if n := sim.RequestStats().Requests; n != wantReqs {
			t.Errorf("%s: %d requests to Nomad, want %d (%+v)", h.Name, n, wantReqs, sim.RequestStats().Routes)
		}
	}
}

package nomadsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// GET /v1/agent/health tells what the receiving agent runs, with no ACL check
// (not even of the token); an unhealthy answer is a 500 whose body is the same
// JSON, which the API client decodes.
func TestAgentHealth(t *testing.T) {
	s, _ := newTestSim(t, Config{Servers: 1, Clients: 1, ACL: true})
	var server, client Host
	for _, h := range s.Hosts() {
		if h.Server != nil {
			server = h
		} else {
			client = h
		}
	}
	const unknown = "00000000-0000-0000-0000-000000000000"
	health := func(h Host) *api.AgentHealthResponse {
		t.Helper()
		got, err := newClient(t, "http://"+h.Addr, unknown).Agent().Health()
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		return got
	}
	if got := health(client); got.Server != nil || got.Client == nil || !got.Client.Ok || got.Client.Message != "ok" {
		t.Errorf("client host: %+v", got)
	}
	if got := health(server); got.Client != nil || got.Server == nil || !got.Server.Ok {
		t.Errorf("server host: %+v", got)
	}

	// ?type= asks for one kind; one the agent does not run fails.
	resp, body := rawGet(t, "http://"+server.Addr+"/v1/agent/health?type=client")
	var typed api.AgentHealthResponse
	if resp.StatusCode != http.StatusInternalServerError || json.Unmarshal([]byte(body), &typed) != nil ||
		typed.Client == nil || typed.Client.Ok || typed.Client.Message != "client not enabled" || typed.Server != nil {
		t.Errorf("?type=client on a server: %d %s", resp.StatusCode, body)
	}

	// Without a leader the server is unhealthy (500, the JSON as body); the
	// client is not asked about the leader.
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	resp, body = rawGet(t, "http://"+server.Addr+"/v1/agent/health")
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, `"no leader"`) {
		t.Errorf("server without a leader: %d %s", resp.StatusCode, body)
	}
	if got := health(server); got.Server == nil || got.Server.Ok || got.Server.Message != "no leader" {
		t.Errorf("server without a leader, decoded: %+v", got)
	}
	if got := health(client); got.Client == nil || !got.Client.Ok {
		t.Errorf("client without a leader: %+v", got)
	}
}

// A server's agent answers GET /v1/agent/members for itself, from its own Serf
// (Status.Members is not forwarded), even while autopilot has it out of the
// Raft configuration; a client's agent answers as a server does (the leader's).
func TestAgentMembersAnswersForItself(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, Clients: 1})
	leader, followers := opServers(s)
	self := func(h *Host) string {
		t.Helper()
		m, err := vtClient(t, s, "http://"+h.Addr, "").Agent().Members()
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		return m.ServerName + "." + m.ServerRegion
	}
	for _, h := range append([]*Host{leader}, followers...) {
		if got := self(h); got != h.Server.Name {
			t.Errorf("%s's agent answers as %s", h.Name, got)
		}
	}
	for _, h := range s.Hosts() {
		if h.Server == nil {
			if got := self(&h); got != leader.Server.Name {
				t.Errorf("client %s answers as %s, want the leader %s", h.Name, got, leader.Server.Name)
			}
		}
	}
	// Removed from the Raft configuration while up (a leader would add it back
	// at once; there is none here).
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.servers.Remove(s.servers.ByHost(followers[0].Name))
	s.mu.Unlock()
	if got := self(followers[0]); got != followers[0].Server.Name {
		t.Errorf("a removed server answers as %s, want itself (%s)", got, followers[0].Server.Name)
	}
}

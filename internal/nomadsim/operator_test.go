package nomadsim

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// opHealth reads autopilot health through the api client; a 429 comes back as an
// error whose body is the same JSON.
func opHealth(t *testing.T, c *api.Client) (int, *api.OperatorHealthReply) {
	t.Helper()
	out, _, err := c.Operator().AutopilotServerHealth(nil)
	if err == nil {
		return 200, out
	}
	code, body := vtStatus(t, err)
	if code != 429 {
		return code, nil
	}
	var r api.OperatorHealthReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("429 body does not parse: %v: %q", err, body)
	}
	return code, &r
}

func opWait(t *testing.T, s *Sim, what string, cond func(st *serverState) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func(v *View) bool { return cond(&v.s.servers) }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// opServers returns the server hosts, the leader first.
func opServers(s *Sim) (leader *Host, followers []*Host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.sortedHostsLocked() {
		if h.Server == nil {
			continue
		}
		if h.Server.ID == s.servers.leaderLocked() {
			leader = h
		} else {
			followers = append(followers, h)
		}
	}
	return leader, followers
}

func TestAutopilotHealthy(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	code, h := opHealth(t, c)
	if code != 200 || !h.Healthy || h.FailureTolerance != 1 || len(h.Servers) != 3 || len(h.Voters) != 3 {
		t.Fatalf("%d %+v", code, h)
	}
	leader, _ := opServers(s)
	if h.Leader != leader.Server.ID {
		t.Fatalf("leader %q, want %q", h.Leader, leader.Server.ID)
	}
	leaders := 0
	for _, sh := range h.Servers {
		if sh.Leader {
			leaders++
		}
		if sh.SerfStatus != "alive" || !sh.Voter || !sh.Healthy || sh.LastTerm != 1 || sh.Version == "" ||
			!strings.HasSuffix(sh.Name, ".global") || !strings.HasSuffix(sh.Address, ":4647") {
			t.Fatalf("server %+v", sh)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	// The wire form: LastContact a duration string, StableSince whole seconds UTC.
	raw := vtDo(t, s, "GET", "/v1/operator/autopilot/health", "", "")
	if raw.code != 200 || !strings.Contains(raw.body, `"LastContact":"0s"`) ||
		!regexp.MustCompile(`"StableSince":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"`).MatchString(raw.body) {
		t.Fatalf("wire: %s", raw.body)
	}
	if raw := vtDo(t, s, "PUT", "/v1/operator/autopilot/health", "", ""); raw.code != 404 {
		t.Fatalf("PUT: %d", raw.code)
	}
}

func TestAutopilotFailureTolerance(t *testing.T) {
	cases := []struct {
		servers, down int
		code, ft      int // code 500: the quorum is lost, so is the leader
	}{
		{3, 0, 200, 1}, {3, 1, 429, 0}, {3, 2, 500, 0},
		{5, 0, 200, 2}, {5, 1, 429, 1}, {5, 2, 429, 0},
	}
	for _, tc := range cases {
		t.Run(strings.Join([]string{itoa(uint64(tc.servers)), "servers", itoa(uint64(tc.down)), "down"}, "-"), func(t *testing.T) {
			s := vtSim(t, Config{Servers: tc.servers})
			c := vtClient(t, s, "", "")
			_, followers := opServers(s)
			s.mu.Lock()
			for _, h := range followers[:tc.down] {
				s.servers.HostDown(s.servers.Find(h.Name))
			}
			s.mu.Unlock()
			if tc.code == 500 {
				opWait(t, s, "leader loss", func(st *serverState) bool { return st.leaderLocked() == "" })
				_, _, err := c.Operator().AutopilotServerHealth(nil)
				if code, body := vtStatus(t, err); code != 500 || body != "No cluster leader" {
					t.Fatalf("%d %q", code, body)
				}
				return
			}
			code, h := opHealth(t, c)
			if code != tc.code || h.FailureTolerance != tc.ft || h.Healthy != (tc.down == 0) {
				t.Fatalf("%d %+v", code, h)
			}
			failed := 0
			for _, sh := range h.Servers {
				if sh.SerfStatus == "failed" {
					failed++
					if sh.Healthy || sh.Leader {
						t.Fatalf("failed server %+v", sh)
					}
				}
			}
			if failed != tc.down {
				t.Fatalf("%d failed servers", failed)
			}
		})
	}
}

func TestAutopilotStalledServer(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	_, followers := opServers(s)
	if err := s.SetServerHealthy(followers[0].Name, false); err != nil {
		t.Fatal(err)
	}
	code, h := opHealth(t, c)
	if code != 429 || h.Healthy || h.FailureTolerance != 0 {
		t.Fatalf("%d %+v", code, h)
	}
	for _, sh := range h.Servers {
		if sh.ID == followers[0].Server.ID && (sh.Healthy || sh.SerfStatus != "alive") {
			t.Fatalf("stalled %+v", sh)
		}
	}
	if err := s.SetServerHealthy(followers[0].Name, true); err != nil {
		t.Fatal(err)
	}
	if code, h := opHealth(t, c); code != 200 || h.FailureTolerance != 1 {
		t.Fatalf("recovered: %d %+v", code, h)
	}
	if err := s.SetServerHealthy("nope", false); err == nil {
		t.Fatal("unknown host accepted")
	}
}

// TestServerReboot reboots the leader's host: the others elect a new leader, the
// rebooted server comes back failed→alive but unhealthy, healthy after it caught up.
// Dead-server cleanup is off here (autopilot_test.go covers it): the server keeps
// its vote.
func TestServerReboot(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, BootTime: 100 * time.Millisecond, ServerStabilizeTime: 300 * time.Millisecond,
		KeepDeadServers: true})
	c := vtClient(t, s, "", "")
	leader, _ := opServers(s)
	old := leader.Server.ID
	if err := s.Reboot(leader.Name); err != nil {
		t.Fatal(err)
	}
	opWait(t, s, "new leader", func(st *serverState) bool { return st.leaderLocked() != "" && st.leaderLocked() != old })
	code, h := opHealth(t, c)
	if code != 429 || h.FailureTolerance != 0 {
		t.Fatalf("while down: %d %+v", code, h)
	}
	opWait(t, s, "server back", func(st *serverState) bool {
		e := st.ByID(old)
		return e.Up()
	})
	code, h = opHealth(t, c)
	if code != 429 {
		t.Fatalf("just booted: %d %+v", code, h)
	}
	for _, sh := range h.Servers {
		if sh.ID == old && (sh.SerfStatus != "alive" || sh.Healthy || sh.Leader || sh.LastTerm != 1) {
			t.Fatalf("booted server %+v", sh)
		}
	}
	back := time.Now()
	opWait(t, s, "caught up", func(st *serverState) bool { return st.ByID(old).Healthy() })
	if time.Since(back) < 200*time.Millisecond {
		t.Fatalf("healthy %v after boot", time.Since(back))
	}
	code, h = opHealth(t, c)
	if code != 200 || h.FailureTolerance != 1 {
		t.Fatalf("after catch-up: %d %+v", code, h)
	}
	for _, sh := range h.Servers {
		if sh.LastTerm != 2 {
			t.Fatalf("term %+v", sh)
		}
	}
	var leaderEvents int
	for _, e := range s.Events(0) {
		if e.Type == EventLeader {
			leaderEvents++
		}
	}
	// Initial election, loss, new election.
	if leaderEvents != 3 {
		t.Fatalf("%d leader events", leaderEvents)
	}
}

func TestOperatorACL(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ACL: true})
	op := s.CreateToken("op", vtParsePolicy(t, "operator {\n  policy = \"read\"\n}\nnode {\n  policy = \"read\"\n}\n"))
	none := s.CreateToken("none")
	if _, _, err := vtClient(t, s, "", none.SecretID).Operator().AutopilotServerHealth(nil); err == nil {
		t.Fatal("health without operator:read")
	} else if code, body := vtStatus(t, err); code != 403 || body != "Permission denied" {
		t.Fatalf("%d %q", code, body)
	}
	oc := vtClient(t, s, "", op.SecretID)
	if code, _ := opHealth(t, oc); code != 200 {
		t.Fatalf("health with operator:read: %d", code)
	}
	// Raft configuration and transfers need management, not operator:read.
	if _, err := oc.Operator().RaftGetConfiguration(nil); err == nil {
		t.Fatal("raft configuration with operator:read")
	}
	_, followers := opServers(s)
	if err := oc.Operator().RaftTransferLeadershipByID(followers[0].Server.ID, nil); err == nil {
		t.Fatal("transfer with operator:read")
	} else if code, _ := vtStatus(t, err); code != 403 {
		t.Fatalf("transfer: %d", code)
	}
	mc := vtClient(t, s, "", s.ManagementToken())
	cfg, err := mc.Operator().RaftGetConfiguration(nil)
	if err != nil || len(cfg.Servers) != 3 || cfg.Index == 0 {
		t.Fatalf("raft configuration: %+v %v", cfg, err)
	}
	leaders := 0
	for _, srv := range cfg.Servers {
		if srv.Leader {
			leaders++
		}
		if !srv.Voter || srv.RaftProtocol != "3" || !strings.HasSuffix(srv.Node, ".global") {
			t.Fatalf("raft server %+v", srv)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	raw := vtDo(t, s, "GET", "/v1/operator/raft/configuration", s.ManagementToken(), "")
	if raw.code != 200 || raw.header.Get("X-Nomad-Index") != "" {
		t.Fatalf("raw configuration: %d %v", raw.code, raw.header)
	}
	// Members need node:read.
	if m, err := oc.Agent().Members(); err != nil || len(m.Members) != 3 {
		t.Fatalf("members: %+v %v", m, err)
	}
	if _, err := vtClient(t, s, "", none.SecretID).Agent().Members(); err == nil {
		t.Fatal("members without node:read")
	}
}

func TestTransferLeadership(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	leader, followers := opServers(s)
	target := followers[1]
	if err := c.Operator().RaftTransferLeadershipByID(target.Server.ID, nil); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	if got, err := c.Status().Leader(); err != nil || got != target.Server.RaftAddr {
		t.Fatalf("leader after transfer %q %v, want %q", got, err, target.Server.RaftAddr)
	}
	ev := s.Events(0)
	last := Event{}
	for _, e := range ev {
		if e.Type == EventLeader {
			last = e
		}
	}
	if last.Host != target.Name || last.Details["previous"] != leader.Server.ID || last.Details["reason"] != "leadership transfer" {
		t.Fatalf("leader event %+v", last)
	}
	// The agent of the new leader says so.
	self, err := vtClient(t, s, "http://"+target.Addr, "").Agent().Self()
	if err != nil || self.Stats["nomad"]["leader"] != "true" || self.Stats["nomad"]["leader_addr"] != target.Server.RaftAddr {
		t.Fatalf("agent self: %+v %v", self.Stats["nomad"], err)
	}
	// By address, back to the old leader.
	if err := c.Operator().RaftTransferLeadershipByAddress(leader.Server.RaftAddr, nil); err != nil {
		t.Fatal(err)
	}
	// To the current leader: Noop.
	raw := vtDo(t, s, "PUT", "/v1/operator/raft/transfer-leadership?id="+leader.Server.ID, "", "")
	want := `{"From":{"Address":"` + leader.Server.RaftAddr + `","ID":"` + leader.Server.ID + `"},"To":{"Address":"` +
		leader.Server.RaftAddr + `","ID":"` + leader.Server.ID + `"},"Noop":true,"Err":null}`
	if raw.code != 200 || strings.TrimSpace(raw.body) != want {
		t.Fatalf("noop: %d %s", raw.code, raw.body)
	}
	bad := []struct{ query, msg string }{
		{"", "must specify id or address"},
		{"?id=a&address=b", "must specify either id or address"},
		{"?id=", "id must be non-empty"},
		{"?id=a&id=b", "must specify only one id"},
		{"?id=nope", `id "nope" was not found in the Raft configuration`},
		{"?address=1.2.3.4:4647", `address "1.2.3.4:4647" was not found in the Raft configuration`},
	}
	for _, b := range bad {
		raw := vtDo(t, s, "PUT", "/v1/operator/raft/transfer-leadership"+b.query, "", "")
		if raw.code != 400 || raw.body != b.msg {
			t.Errorf("%s: %d %q", b.query, raw.code, raw.body)
		}
	}
	// To a server that is down: raft times out.
	s.mu.Lock()
	s.servers.HostDown(s.servers.Find(followers[0].Name))
	s.mu.Unlock()
	if err := c.Operator().RaftTransferLeadershipByID(followers[0].Server.ID, nil); err == nil {
		t.Fatal("transfer to a down server")
	} else if code, _ := vtStatus(t, err); code != 500 {
		t.Fatalf("transfer to down server: %d", code)
	}
	// Without a leader the forward fails.
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	if err := c.Operator().RaftTransferLeadershipByID(target.Server.ID, nil); err == nil {
		t.Fatal("transfer without leader")
	} else if code, body := vtStatus(t, err); code != 500 || body != "No cluster leader" {
		t.Fatalf("%d %q", code, body)
	}
}

func TestStatusAndLeaderLoss(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	leader, _ := opServers(s)
	got, err := c.Status().Leader()
	if err != nil || got != leader.Server.RaftAddr {
		t.Fatalf("leader %q %v", got, err)
	}
	peers, err := c.Status().Peers()
	if err != nil || len(peers) != 3 {
		t.Fatalf("peers %v %v", peers, err)
	}
	for _, p := range []string{"/v1/status/leader", "/v1/status/peers"} {
		raw := vtDo(t, s, "GET", p, "", "")
		if raw.code != 200 || raw.header.Get("X-Nomad-Index") != "" {
			t.Fatalf("%s: %d %v", p, raw.code, raw.header)
		}
	}
	if raw := vtDo(t, s, "GET", "/v1/status/leader", "", ""); strings.TrimSpace(raw.body) != `"`+leader.Server.RaftAddr+`"` {
		t.Fatalf("leader body %q", raw.body)
	}

	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status().Leader(); err == nil {
		t.Fatal("leader without a leader")
	} else if code, body := vtStatus(t, err); code != 500 || body != "No cluster leader" {
		t.Fatalf("%d %q", code, body)
	}
	if raw := vtDo(t, s, "GET", "/v1/status/leader?stale", "", ""); raw.code != 200 || strings.TrimSpace(raw.body) != `""` {
		t.Fatalf("stale leader: %d %q", raw.code, raw.body)
	}
	if raw := vtDo(t, s, "GET", "/v1/vars?stale", "", ""); raw.code != 200 || raw.header.Get("X-Nomad-KnownLeader") != "false" {
		t.Fatalf("stale list: %d %v", raw.code, raw.header)
	}
	if _, _, err := c.Operator().AutopilotServerHealth(nil); err == nil {
		t.Fatal("health without leader")
	}
	if err := s.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Status().Leader(); err != nil || got == "" {
		t.Fatalf("after re-election %q %v", got, err)
	}
}

func TestLeaderLossRestoresLockTimers(t *testing.T) {
	const ttl = 100 * time.Millisecond
	s := vtSim(t, Config{Servers: 3, AllowShortLockTTL: true})
	c := vtClient(t, s, "", "")
	v, _, err := c.Variables().AcquireLock(&api.Variable{Path: "l", Lock: &api.VariableLock{TTL: ttl.String(), LockDelay: "10ms"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No leader: no timers run; the lock outlives 2×TTL+delay by far.
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	waitUntil(time.Now().Add(4 * ttl))
	if err := s.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	elected := time.Now()
	got, _, err := c.Variables().Read("l", &api.QueryOptions{AuthToken: ""})
	if err != nil || got.Lock == nil || got.Lock.ID != v.Lock.ID {
		t.Fatalf("lock lost without a leader: %+v %v", got, err)
	}
	// The new leader gives it a full TTL again, then it expires.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func(v *View) bool {
		sv := v.s.vars.vars[varKey{"default", "l"}]
		return sv.lock == nil
	}); err != nil {
		t.Fatal("lock never expired after re-election")
	}
	if d := time.Since(elected); d < 2*ttl {
		t.Fatalf("expired %v after the new leader", d)
	}
}

func TestImplicitLeader(t *testing.T) {
	s := vtSim(t, Config{Clients: 1})
	c := vtClient(t, s, "", "")
	if got, err := c.Status().Leader(); err != nil || got != implicitServerAddr {
		t.Fatalf("leader %q %v", got, err)
	}
	if p, err := c.Status().Peers(); err != nil || len(p) != 1 {
		t.Fatalf("peers %v %v", p, err)
	}
	code, h := opHealth(t, c)
	if code != 200 || !h.Healthy || h.FailureTolerance != 0 || len(h.Servers) != 1 || !h.Servers[0].Leader {
		t.Fatalf("%d %+v", code, h)
	}
	cfg, err := c.Operator().RaftGetConfiguration(nil)
	if err != nil || len(cfg.Servers) != 1 || !cfg.Servers[0].Leader {
		t.Fatalf("%+v %v", cfg, err)
	}
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status().Leader(); err == nil {
		t.Fatal("implicit leader not lost")
	}
	if err := s.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	// Adding a server host replaces the implicit server.
	h1, err := s.AddHost("srv-a", true, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Status().Leader(); err != nil || got != h1.Server.RaftAddr {
		t.Fatalf("leader after AddHost %q %v", got, err)
	}
}

func TestAgentMembers(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	_, followers := opServers(s)
	s.mu.Lock()
	s.servers.HostDown(s.servers.Find(followers[0].Name))
	s.mu.Unlock()
	m, err := c.Agent().Members()
	if err != nil || len(m.Members) != 3 || m.ServerRegion != "global" || m.ServerDC != "dc1" || m.ServerName == "" {
		t.Fatalf("%+v %v", m, err)
	}
	for _, mem := range m.Members {
		want := "alive"
		if mem.Name == followers[0].Server.Name {
			want = "failed"
		}
		if mem.Status != want || mem.Tags["id"] == "" || mem.Tags["raft_vsn"] != "3" {
			t.Fatalf("member %+v", mem)
		}
	}
}

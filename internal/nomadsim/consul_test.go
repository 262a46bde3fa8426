package nomadsim

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
)

// ccClient is a real consul/api client for addr (host:port or URL).
func ccClient(t *testing.T, addr string) *consulapi.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := consulapi.NewClient(&consulapi.Config{Address: addr, Scheme: "http", Transport: tr, Token: "ignored"})
	if err != nil {
		t.Fatalf("consul NewClient: %v", err)
	}
	return c
}

// auxDo sends a plain HTTP request to base+path; err is a transport error.
func auxDo(t *testing.T, method, base, path string, hdr map[string]string) (int, http.Header, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

func auxWait(t *testing.T, s *Sim, what string, cond func(v *View) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// auxFollowers returns the hosts of g's non-leader members.
func auxFollowers(s *Sim, c *raftsim.Cluster) (leader string, followers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range c.Members() {
		if m == c.Leader() {
			leader = m.Host
		} else {
			followers = append(followers, m.Host)
		}
	}
	return leader, followers
}

func TestConsulFailureTolerance(t *testing.T) {
	for _, tc := range []struct {
		servers int
		want    []int // tolerance with 0, 1, 2 followers down; -1: no leader
	}{
		{3, []int{1, 0, -1}},
		{5, []int{2, 1, 0}},
	} {
		t.Run(strconv.Itoa(tc.servers), func(t *testing.T) {
			s := vtSim(t, Config{Servers: tc.servers, ConsulServers: true, BootTime: time.Hour})
			c := ccClient(t, s.ConsulAddress())
			_, followers := auxFollowers(s, s.consul.Raft())
			for down, want := range tc.want {
				if down > 0 {
					if err := s.Reboot(followers[down-1]); err != nil {
						t.Fatal(err)
					}
				}
				if want < 0 {
					auxWait(t, s, "leader lost", func(v *View) bool { return v.s.consul.Raft().Leader() == nil })
					code, _, body, err := auxDo(t, "GET", s.ConsulAddress(), "/v1/operator/autopilot/health", nil)
					if err != nil || code != 500 || body != "No cluster leader" {
						t.Fatalf("no quorum: %d %q %v", code, body, err)
					}
					continue
				}
				out, err := c.Operator().AutopilotServerHealth(nil)
				if err != nil {
					t.Fatalf("down=%d: %v", down, err)
				}
				if out.FailureTolerance != want || out.Healthy != (down == 0) || len(out.Servers) != tc.servers {
					t.Fatalf("down=%d: tolerance %d healthy %v, want %d", down, out.FailureTolerance, out.Healthy, want)
				}
				failed := 0
				for _, sh := range out.Servers {
					if sh.SerfStatus == "failed" {
						failed++
						if sh.Healthy {
							t.Fatalf("failed server healthy: %+v", sh)
						}
					}
				}
				if failed != down {
					t.Fatalf("down=%d: %d failed servers", down, failed)
				}
				wantCode := 200
				if down > 0 {
					wantCode = 429
				}
				code, _, body, err := auxDo(t, "GET", s.ConsulAddress(), "/v1/operator/autopilot/health", nil)
				if err != nil || code != wantCode {
					t.Fatalf("down=%d: code %d, want %d (%v) %s", down, code, wantCode, err, body)
				}
				st, err := c.Operator().AutopilotState(nil)
				if err != nil {
					t.Fatal(err)
				}
				if st.FailureTolerance != want || st.Healthy != (down == 0) || len(st.Voters) != tc.servers {
					t.Fatalf("state down=%d: %+v", down, st)
				}
			}
		})
	}
}

func TestConsulUnhealthyServerAndControl(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true})
	c := ccClient(t, s.ConsulAddress())
	_, followers := auxFollowers(s, s.consul.Raft())
	code, _, body, err := auxDo(t, "PUT", s.Address(), "/sim/v1/consul/servers/"+followers[0]+"/health?healthy=false", nil)
	if err != nil || code != 200 {
		t.Fatalf("control: %d %s %v", code, body, err)
	}
	out, err := c.Operator().AutopilotServerHealth(nil) // 429 is accepted by consul/api
	if err != nil {
		t.Fatal(err)
	}
	if out.Healthy || out.FailureTolerance != 0 {
		t.Fatalf("%+v", out)
	}
	for _, sh := range out.Servers {
		if sh.Name == followers[0] && (sh.Healthy || sh.SerfStatus != "alive") {
			t.Fatalf("stalled server %+v", sh)
		}
	}
	if code, _, _, _ := auxDo(t, "GET", s.ConsulAddress(), "/v1/operator/autopilot/health", nil); code != 429 {
		t.Fatalf("code %d, want 429", code)
	}
	if err := s.SetConsulServerHealthy(followers[0], true); err != nil {
		t.Fatal(err)
	}
	if code, _, _, _ := auxDo(t, "GET", s.ConsulAddress(), "/v1/operator/autopilot/health", nil); code != 200 {
		t.Fatalf("code %d, want 200", code)
	}
	if err := s.SetConsulServerHealthy("nope", true); err == nil {
		t.Fatal("unknown host accepted")
	}
}

func TestConsulRaftStatusAgentAndTransfer(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true})
	c := ccClient(t, s.ConsulAddress())
	leaderHost, followers := auxFollowers(s, s.consul.Raft())

	st, err := c.Operator().AutopilotState(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 3 || st.Servers[st.Leader].Status != consulapi.AutopilotServerLeader ||
		st.Servers[st.Leader].Name != leaderHost || !st.Healthy {
		t.Fatalf("state %+v", st)
	}
	for id, srv := range st.Servers {
		if srv.ID != id || (id != st.Leader && srv.Status != consulapi.AutopilotServerVoter) {
			t.Fatalf("server %s: %+v", id, srv)
		}
	}

	cfg, err := c.Operator().RaftGetConfiguration(nil)
	if err != nil {
		t.Fatal(err)
	}
	var leaderAddr, leaderID string
	for _, rs := range cfg.Servers {
		if rs.Leader {
			leaderAddr, leaderID = rs.Address, rs.ID
		}
	}
	if len(cfg.Servers) != 3 || leaderID != st.Leader || cfg.Index == 0 {
		t.Fatalf("raft configuration %+v", cfg)
	}
	if l, err := c.Status().Leader(); err != nil || l != leaderAddr {
		t.Fatalf("status leader %q %v, want %q", l, err, leaderAddr)
	}
	if p, err := c.Status().Peers(); err != nil || len(p) != 3 {
		t.Fatalf("peers %v %v", p, err)
	}

	h, _ := s.Host(followers[0])
	self, err := ccClient(t, h.ConsulAddr).Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if self["Config"]["Server"] != true || self["Config"]["NodeName"] != followers[0] || self["Config"]["Datacenter"] != "dc1" {
		t.Fatalf("self %+v", self["Config"])
	}

	// Transfer to a named server, then let Consul pick one.
	var targetID string
	for id, srv := range st.Servers {
		if srv.Name == followers[1] {
			targetID = id
		}
	}
	tr, err := c.Operator().RaftLeaderTransfer(targetID, nil)
	if err != nil || !tr.Success {
		t.Fatalf("transfer: %+v %v", tr, err)
	}
	if got := s.ConsulLeader(); got != followers[1] {
		t.Fatalf("leader %s, want %s", got, followers[1])
	}
	if _, err := c.Operator().RaftLeaderTransfer(targetID, nil); err == nil {
		t.Fatal("transfer to the leader itself succeeded")
	}
	tr, err = c.Operator().RaftLeaderTransfer("", nil)
	if err != nil || !tr.Success || s.ConsulLeader() == followers[1] || s.ConsulLeader() == "" {
		t.Fatalf("transfer without id: %+v %v leader %s", tr, err, s.ConsulLeader())
	}

	// Leader loss: a new leader is elected among the others.
	old := s.ConsulLeader()
	if err := s.Reboot(old); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "new consul leader", func(v *View) bool {
		l := v.s.consul.Raft().Leader()
		return l != nil && l.Host != old
	})
	n := 0
	for _, e := range s.Events(0) {
		if e.Type == EventConsulLeader {
			n++
		}
	}
	if n < 5 { // election, two transfers, loss, election
		t.Fatalf("%d consul.leader events", n)
	}
}

func TestConsulMaintenanceSurvivesReboot(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true})
	_, followers := auxFollowers(s, s.consul.Raft())
	name := followers[0]
	h, _ := s.Host(name)
	local := ccClient(t, h.ConsulAddr)
	cluster := ccClient(t, s.ConsulAddress())

	if code, _, body, _ := auxDo(t, "PUT", "http://"+h.ConsulAddr, "/v1/agent/maintenance", nil); code != 400 {
		t.Fatalf("missing enable: %d %s", code, body)
	}
	if err := local.Agent().EnableNodeMaintenance("kernel 6.8"); err != nil {
		t.Fatal(err)
	}
	if err := local.Agent().EnableNodeMaintenance("again"); err != nil { // no-op
		t.Fatal(err)
	}
	checkMaint := func(c *consulapi.Client, want bool) {
		t.Helper()
		checks, err := c.Agent().Checks()
		if err != nil {
			t.Fatal(err)
		}
		ck, ok := checks["_node_maintenance"]
		if ok != want || (ok && (ck.Status != "critical" || ck.Notes != "kernel 6.8" || ck.Name != "Node Maintenance Mode")) {
			t.Fatalf("agent checks %+v, want maintenance=%v", checks, want)
		}
	}
	checkMaint(local, true)
	if _, err := os.Stat(filepath.Join(h.Dir, "consul", "checks", "_node_maintenance")); err != nil {
		t.Fatalf("maintenance not persisted: %v", err)
	}

	if err := s.Reboot(name); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := auxDo(t, "GET", "http://"+h.ConsulAddr, "/v1/agent/self", nil); err == nil {
		t.Fatal("consul agent answered while its host is down")
	}
	hc, meta, err := cluster.Health().Node(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if meta.LastIndex == 0 || !meta.KnownLeader {
		t.Fatalf("meta %+v", meta)
	}
	states := map[string]string{}
	for _, c := range hc {
		states[c.CheckID] = c.Status
	}
	if states["serfHealth"] != "critical" || states["_node_maintenance"] != "critical" {
		t.Fatalf("checks while down %v", states)
	}
	auxWait(t, s, "host back", func(v *View) bool { x, _ := v.Host(name); return x.Up })
	checkMaint(local, true)

	// A blocking query on the node's checks returns when maintenance is disabled.
	_, meta, err = cluster.Health().Node(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		hc   consulapi.HealthChecks
		meta *consulapi.QueryMeta
		err  error
	}
	done := make(chan res, 1)
	go func() {
		hc, m, err := cluster.Health().Node(name, &consulapi.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 5 * time.Second})
		done <- res{hc, m, err}
	}()
	if err := local.Agent().DisableNodeMaintenance(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.meta.LastIndex <= meta.LastIndex {
		t.Fatalf("blocking query: %+v %v", r.meta, r.err)
	}
	for _, c := range r.hc {
		if c.CheckID == "_node_maintenance" {
			t.Fatalf("maintenance still in catalog: %+v", c)
		}
	}
	checkMaint(local, false)
	if _, err := os.Stat(filepath.Join(h.Dir, "consul", "checks", "_node_maintenance")); !os.IsNotExist(err) {
		t.Fatalf("maintenance file left: %v", err)
	}
	n := 0
	for _, e := range s.Events(0) {
		if e.Type == EventConsulMaintenance && e.Host == name {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d consul.maintenance events, want 2", n)
	}
}

// The emulated Consul's ACLs are off: its ACL endpoints answer 401 "ACL
// support disabled", as Consul's do then.
func TestConsulACLDisabled(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true})
	_, _, err := ccClient(t, s.ConsulAddress()).ACL().TokenReadSelf(nil)
	if err == nil || !strings.Contains(err.Error(), "401 (ACL support disabled)") {
		t.Fatalf("token self: %v, want 401 ACL support disabled", err)
	}
}

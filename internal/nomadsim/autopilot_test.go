package nomadsim

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
)

func apEvent(s *Sim, typ, host string) (Event, bool) {
	for _, e := range s.Events(0) {
		if e.Type == typ && e.Host == host {
			return e, true
		}
	}
	return Event{}, false
}

func nomadRaftServer(t *testing.T, c *api.Client, id string) (*api.RaftServer, bool) {
	t.Helper()
	rc, err := c.Operator().RaftGetConfiguration(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rc.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return nil, false
}

func nomadHealthOf(h *api.OperatorHealthReply, id string) (api.ServerHealth, bool) {
	for _, s := range h.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return api.ServerHealth{}, false
}

// A rebooted Nomad server is removed by autopilot's dead-server cleanup while it is
// down, comes back as a non-voter, and is promoted only once it has been healthy
// for the stabilization time (nomad/leader.go addRaftPeer, raft-autopilot).
func TestAutopilotRebootedServerRejoinsAsNonVoter(t *testing.T) {
	const stabilize = 400 * time.Millisecond
	s := vtSim(t, Config{Servers: 3, BootTime: time.Second, ServerStabilizeTime: 200 * time.Millisecond,
		AutopilotInterval: 50 * time.Millisecond, AutopilotStabilizationTime: stabilize})
	c := vtClient(t, s, "", "")
	_, followers := opServers(s)
	h := followers[0]
	id := h.Server.ID
	if err := s.Reboot(h.Name); err != nil {
		t.Fatal(err)
	}

	opWait(t, s, "removal", func(st *serverState) bool { return st.ByID(id) == nil })
	if _, found := nomadRaftServer(t, c, id); found {
		t.Fatal("the dead server is still in the Raft configuration")
	}
	code, hr := opHealth(t, c)
	if _, found := nomadHealthOf(hr, id); found || code != 200 || len(hr.Voters) != 2 || hr.FailureTolerance != 0 {
		t.Fatalf("after removal: %d %+v", code, hr)
	}

	opWait(t, s, "rejoin", func(st *serverState) bool { return st.ByID(id) != nil })
	if rs, found := nomadRaftServer(t, c, id); !found || rs.Voter {
		t.Fatalf("back: raft %+v found=%t, want a non-voter", rs, found)
	}
	_, hr = opHealth(t, c)
	if sh, found := nomadHealthOf(hr, id); !found || sh.Voter || slices.Contains(hr.Voters, id) || hr.FailureTolerance != 0 {
		t.Fatalf("back: %+v", hr)
	}

	opWait(t, s, "promotion", func(st *serverState) bool { e := st.ByID(id); return e != nil && e.Voter() })
	code, hr = opHealth(t, c)
	if sh, _ := nomadHealthOf(hr, id); code != 200 || !sh.Voter || !sh.Healthy || hr.FailureTolerance != 1 || len(hr.Voters) != 3 {
		t.Fatalf("promoted: %d %+v", code, hr)
	}
	if rs, found := nomadRaftServer(t, c, id); !found || !rs.Voter {
		t.Fatalf("promoted: raft %+v", rs)
	}
	healthy, _ := apEvent(s, EventServerHealth, h.Name)
	promoted, ok := apEvent(s, EventServerPromoted, h.Name)
	if !ok || healthy.Details["reason"] != "caught up" || promoted.Time.Sub(healthy.Time) < stabilize {
		t.Fatalf("healthy at %v (%v), promoted at %v: want at least %v between", healthy.Time, healthy.Details, promoted.Time, stabilize)
	}
}

// With cleanup_dead_servers off the rebooted server keeps its vote.
func TestAutopilotKeepDeadServers(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, BootTime: 500 * time.Millisecond, AutopilotInterval: 20 * time.Millisecond,
		KeepDeadServers: true})
	c := vtClient(t, s, "", "")
	_, followers := opServers(s)
	h := followers[0]
	if err := s.Reboot(h.Name); err != nil {
		t.Fatal(err)
	}
	opWait(t, s, "boot", func(st *serverState) bool { return st.ByID(h.Server.ID).Up() })
	if rs, found := nomadRaftServer(t, c, h.Server.ID); !found || !rs.Voter {
		t.Fatalf("raft %+v found=%t", rs, found)
	}
	if _, ok := apEvent(s, EventServerRemoved, h.Name); ok {
		t.Fatal("removed although cleanup is off")
	}
}

// After a leader change Nomad's new leader computes its autopilot state as its
// autopilot starts, before it serves (raft-autopilot run.go Start): the health
// answer is never empty, and every StableSince restarts at the election.
func TestAutopilotStateResetOnLeaderChange(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, AutopilotUpdateInterval: time.Hour})
	c := vtClient(t, s, "", "")
	code, before := opHealth(t, c)
	if code != 200 || len(before.Servers) != 3 {
		t.Fatalf("bootstrap leader has a state: %d %+v", code, before)
	}
	time.Sleep(1500 * time.Millisecond) // past StableSince's rounding to seconds
	_, followers := opServers(s)
	changed := time.Now()
	if err := c.Operator().RaftTransferLeadershipByID(followers[0].Server.ID, nil); err != nil {
		t.Fatal(err)
	}
	// No wait for a state pass (AutopilotUpdateInterval is an hour).
	code, hr := opHealth(t, c)
	if code != 200 || !hr.Healthy || len(hr.Servers) != 3 || len(hr.Voters) != 3 || hr.Leader != followers[0].Server.ID {
		t.Fatalf("right after the leader change: %d %+v", code, hr)
	}
	for _, sh := range hr.Servers {
		old, _ := nomadHealthOf(before, sh.ID)
		if !sh.StableSince.After(old.StableSince) || sh.StableSince.Before(changed.Add(-time.Second)) {
			t.Fatalf("StableSince of %s: %v, was %v, leader changed at %v", sh.Name, sh.StableSince, old.StableSince, changed)
		}
	}
}

// Consul: the same removal, non-voter rejoin and promotion, seen through
// consul/api's autopilot health and state and the Raft configuration.
func TestConsulAutopilotRejoinAndPromotion(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true, BootTime: time.Second,
		ServerStabilizeTime: 200 * time.Millisecond, AutopilotInterval: 50 * time.Millisecond,
		AutopilotStabilizationTime: 400 * time.Millisecond})
	c := ccClient(t, s.ConsulAddress())
	_, followers := auxFollowers(s, s.consul.Raft())
	host := followers[0]
	s.mu.Lock()
	id := s.consul.NodeID(host)
	s.mu.Unlock()
	status := func() (consulapi.AutopilotServerStatus, bool, *consulapi.OperatorHealthReply) {
		t.Helper()
		st, err := c.Operator().AutopilotState(nil)
		if err != nil {
			t.Fatal(err)
		}
		hr, err := c.Operator().AutopilotServerHealth(nil)
		if err != nil {
			t.Fatal(err)
		}
		srv, ok := st.Servers[id]
		return srv.Status, ok, hr
	}
	raftVoter := func() (bool, bool) {
		t.Helper()
		rc, err := c.Operator().RaftGetConfiguration(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, srv := range rc.Servers {
			if srv.ID == id {
				return srv.Voter, true
			}
		}
		return false, false
	}
	if err := s.Reboot(host); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "removal", func(v *View) bool { return v.s.consul.Raft().ByID(id) == nil })
	if _, found, hr := status(); found || hr.FailureTolerance != 0 {
		t.Fatalf("removed server still in the state: %+v", hr)
	}
	if _, found := raftVoter(); found {
		t.Fatal("removed server still in the Raft configuration")
	}
	auxWait(t, s, "rejoin", func(v *View) bool { return v.s.consul.Raft().ByID(id) != nil })
	if st, found, _ := status(); !found || st != consulapi.AutopilotServerNonVoter {
		t.Fatalf("back: status %q found=%t", st, found)
	}
	if voter, found := raftVoter(); !found || voter {
		t.Fatalf("back: raft voter=%t found=%t", voter, found)
	}
	auxWait(t, s, "promotion", func(v *View) bool { m := v.s.consul.Raft().ByID(id); return m != nil && m.Voter() })
	st, _, hr := status()
	if st != consulapi.AutopilotServerVoter || !hr.Healthy || hr.FailureTolerance != 1 {
		t.Fatalf("promoted: %q %+v", st, hr)
	}
	if voter, _ := raftVoter(); !voter {
		t.Fatal("promoted: not a voter in the Raft configuration")
	}
	healthy, _ := apEvent(s, EventConsulHealth, host)
	promoted, _ := apEvent(s, EventServerPromoted, host)
	if promoted.Time.Sub(healthy.Time) < 400*time.Millisecond {
		t.Fatalf("promoted %v after catching up", promoted.Time.Sub(healthy.Time))
	}
}

// Consul after a leader transfer: 429 with no servers until the first pass.
func TestConsulAutopilotStateReset(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, ConsulServers: true, AutopilotUpdateInterval: time.Second})
	c := ccClient(t, s.ConsulAddress())
	if _, err := c.Operator().RaftLeaderTransfer("", nil); err != nil {
		t.Fatal(err)
	}
	hr, err := c.Operator().AutopilotServerHealth(nil)
	if err != nil || hr.Healthy || len(hr.Servers) != 0 {
		t.Fatalf("before the first pass: %+v %v", hr, err)
	}
	code, _, _, err := auxDo(t, "GET", s.ConsulAddress(), "/v1/operator/autopilot/health", nil)
	if err != nil || code != 429 {
		t.Fatalf("code %d %v", code, err)
	}
	st, err := c.Operator().AutopilotState(nil)
	if err != nil || st.Healthy || len(st.Servers) != 0 || st.Leader != "" {
		t.Fatalf("state before the first pass: %+v %v", st, err)
	}
	auxWait(t, s, "first pass", func(v *View) bool { return v.s.consul.Raft().AutopilotReady() })
	if hr, err := c.Operator().AutopilotServerHealth(nil); err != nil || !hr.Healthy || len(hr.Servers) != 3 {
		t.Fatalf("after the first pass: %+v %v", hr, err)
	}
}

// Vault keeps a rebooted node as a voter (no dead-server cleanup by default), and
// after a step-down its autopilot state is empty until the first pass, then every
// stable_since restarts.
func TestVaultAutopilotVoterKeptAndStateReset(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true, VaultAutoUnseal: true, BootTime: 500 * time.Millisecond,
		AutopilotInterval: 20 * time.Millisecond, AutopilotUpdateInterval: 300 * time.Millisecond})
	v := vlClient(t, s.VaultAddress(), "root")
	_, followers := auxFollowers(s, s.vault.Raft())
	if err := s.Reboot(followers[0]); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "boot", func(v *View) bool { m := v.s.vault.Raft().ByID(followers[0]); return m.Up() && m.Healthy() })
	st, err := v.Sys().RaftAutopilotState()
	if err != nil {
		t.Fatal(err)
	}
	if srv := st.Servers[followers[0]]; srv == nil || srv.Status != "voter" || !slices.Contains(st.Voters, followers[0]) {
		t.Fatalf("rebooted vault node: %+v", st)
	}

	stepped := time.Now()
	if err := v.Sys().StepDown(); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "new active node", func(v *View) bool { return v.s.vault.Raft().Leader() != nil })
	st, err = v.Sys().RaftAutopilotState()
	if err != nil {
		t.Fatal(err)
	}
	if st.Healthy || len(st.Servers) != 0 {
		b, _ := json.Marshal(st)
		t.Fatalf("before the first pass: %s", b)
	}
	auxWait(t, s, "first pass", func(v *View) bool { return v.s.vault.Raft().AutopilotReady() })
	st, err = v.Sys().RaftAutopilotState()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Healthy || len(st.Servers) != 3 {
		t.Fatalf("after the first pass: %+v", st)
	}
	for id, srv := range st.Servers {
		since, err := time.Parse(time.RFC3339Nano, srv.StableSince)
		if err != nil || !since.After(stepped) {
			t.Fatalf("%s stable_since %q, stepped down at %v", id, srv.StableSince, stepped)
		}
	}
}

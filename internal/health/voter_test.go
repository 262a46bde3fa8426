package health

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

func nonVoter(id string) func(*ClusterHealth) {
	return func(h *ClusterHealth) {
		for i := range h.Servers {
			if h.Servers[i].ID == id {
				h.Servers[i].Voter = false
			}
		}
	}
}

func removed(id string) func(*ClusterHealth) {
	return func(h *ClusterHealth) {
		var keep []ServerHealth
		for _, s := range h.Servers {
			if s.ID != id {
				keep = append(keep, s)
			}
		}
		h.Servers = keep
	}
}

// emptyState is a new leader's autopilot before its first pass.
func emptyState(h *ClusterHealth) { h.Servers, h.Leader = nil, "" }

// The post-reboot gate frees a server's slot only once it is a voter again, in
// every product: removed by dead-server cleanup, back as a non-voter, promoted.
func TestPostRebootGateVoter(t *testing.T) {
	now := t0.Add(time.Minute)
	tests := []struct {
		name   string
		h      ClusterHealth
		server string
		ok     bool
		reason string
	}{
		{name: "nomad removed while down", h: cluster(Nomad, 3, removed("s2")), server: "s2", reason: "not back in the Raft configuration"},
		{name: "nomad back as non-voter", h: cluster(Nomad, 3, nonVoter("s2")), server: "s2", reason: "back as a non-voter"},
		{name: "consul back as non-voter", h: cluster(Consul, 5, nonVoter("s4")), server: "s4", reason: "waiting for autopilot to promote it"},
		{name: "vault non-voter", h: cluster(Vault, 3, nonVoter("s3")), server: "s3", reason: "non-voter"},
		{name: "another server a non-voter", h: cluster(Nomad, 3, nonVoter("s3")), server: "s2", ok: true},
		{name: "nomad promoted", h: cluster(Nomad, 3), server: "s2", ok: true, reason: "back and stable"},
		{name: "not healthy comes first", h: cluster(Nomad, 3, nonVoter("s2"), unhealthy("s2")), server: "s2", reason: "not healthy yet"},
		{name: "new leader's empty state", h: cluster(Nomad, 3, emptyState), server: "s2", reason: "autopilot reports no servers yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := PostRebootGate(tc.h, tc.server, now, 30*time.Second)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("PostRebootGate = %v, %q; want %v, ~%q", ok, reason, tc.ok, tc.reason)
			}
		})
	}
}

// A new leader's empty autopilot state closes the pre-reboot gate with a reason
// that says so.
func TestPreRebootGateEmptyState(t *testing.T) {
	ok, reason := PreRebootGate(cluster(Consul, 3, emptyState), "s2")
	if ok || !strings.Contains(reason, "autopilot reports no servers yet") {
		t.Fatalf("got %v %q", ok, reason)
	}
}

// Through the readers and the emulator: a rebooted server host's Nomad and Consul
// servers come back as non-voters, and the gate opens only once autopilot promoted
// them.
func TestPostRebootGateSeesNonVoter(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Servers: 3, ConsulServers: true, BootTime: time.Second,
		ServerStabilizeTime: 100 * time.Millisecond, AutopilotInterval: 50 * time.Millisecond,
		AutopilotStabilizationTime: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := testCtx(t)
	nomad := nomadClient(t, s.Address(), "").Operator()
	consul := consulClient(t, s.ConsulAddress()).Operator()
	var host string
	for _, h := range s.Hosts() {
		if h.Server != nil && h.Name != lastLeaderHost(s, nomadsim.EventLeader) && h.Name != s.ConsulLeader() {
			host = h.Name
		}
	}
	if err := s.Reboot(host); err != nil {
		t.Fatal(err)
	}
	reads := map[Product]func() ClusterHealth{
		Nomad:  func() ClusterHealth { return ReadNomad(ctx, nomad, "") },
		Consul: func() ClusterHealth { return ReadConsul(ctx, consul, "") },
	}
	// Both products are watched at once: their non-voter phases overlap in time.
	sawNonVoter, open := map[Product]bool{}, map[Product]bool{}
	err = poll(ctx, "both servers back as voters", func() (bool, error) {
		for p, read := range reads {
			h := read()
			srv, found := serverByName(h, host)
			if !found || open[p] {
				continue
			}
			ok, why := PostRebootGate(h, srv.ID, time.Now(), 0)
			switch {
			case !srv.Voter && srv.Healthy:
				sawNonVoter[p] = true
				if ok || !strings.Contains(why, "non-voter") {
					t.Errorf("%s: gate %v %q for a non-voter", p, ok, why)
				}
			case ok:
				if !srv.Voter || h.FailureTolerance != 1 {
					t.Errorf("%s: gate open with %+v, tolerance %d", p, srv, h.FailureTolerance)
				}
				open[p] = true
			}
		}
		return open[Nomad] && open[Consul], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawNonVoter[Nomad] || !sawNonVoter[Consul] {
		t.Fatalf("no non-voter phase seen: %v", sawNonVoter)
	}
}

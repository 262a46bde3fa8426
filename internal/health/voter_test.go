package health

import (
	"strings"
	"testing"
	"time"
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

package health

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// cluster builds a cluster of n voters s1..sn led by s1, all healthy since t0,
// with autopilot's failure tolerance; mods then change it.
func cluster(p Product, n int, mods ...func(*ClusterHealth)) ClusterHealth {
	h := ClusterHealth{Product: p, Cluster: "c1", Healthy: true, Leader: "s1"}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("s%d", i)
		h.Servers = append(h.Servers, ServerHealth{ID: id, Name: "host-" + id, Healthy: true,
			Voter: true, Leader: i == 1, StableSince: t0})
	}
	for _, m := range mods {
		m(&h)
	}
	healthy := 0
	for _, s := range h.Servers {
		if s.Healthy {
			healthy++
		} else {
			h.Healthy = false
		}
	}
	h.FailureTolerance = max(0, healthy-(len(h.Servers)/2+1))
	return h
}

func unhealthy(id string) func(*ClusterHealth) {
	return func(h *ClusterHealth) {
		for i := range h.Servers {
			if h.Servers[i].ID == id {
				h.Servers[i].Healthy = false
			}
		}
	}
}

func sealed(id string) func(*ClusterHealth) {
	return func(h *ClusterHealth) {
		unhealthy(id)(h)
		for i := range h.Servers {
			if h.Servers[i].ID == id {
				h.Servers[i].Sealed = true
			}
		}
	}
}

func TestPreRebootGate(t *testing.T) {
	tests := []struct {
		name   string
		h      ClusterHealth
		server string
		ok     bool
		reason string // a part of the reason
	}{
		{name: "3 healthy, FT 1", h: cluster(Nomad, 3), server: "s2", ok: true, reason: "failure tolerance 1"},
		{name: "5 healthy, FT 2", h: cluster(Consul, 5), server: "s5", ok: true, reason: "failure tolerance 2"},
		{name: "leader may go too", h: cluster(Nomad, 3), server: "s1", ok: true},
		{name: "1 server, FT 0", h: cluster(Nomad, 1), server: "s1", reason: "failure tolerance 0"},
		{name: "2 servers, FT 0", h: cluster(Nomad, 2), server: "s2", reason: "failure tolerance 0"},
		{name: "3 with another unhealthy, FT 0", h: cluster(Nomad, 3, unhealthy("s3")), server: "s2", reason: "host-s3 (s3)"},
		{name: "5 with another unhealthy, FT 1", h: cluster(Consul, 5, unhealthy("s4")), server: "s2", reason: "other server not healthy"},
		{name: "5 with this one unhealthy, FT 1", h: cluster(Nomad, 5, unhealthy("s2")), server: "s2", reason: "cluster not healthy"},
		{name: "no leader", h: cluster(Nomad, 3, func(h *ClusterHealth) { h.Leader = "" }), server: "s2", reason: "no leader"},
		{name: "vault other sealed", h: cluster(Vault, 3, sealed("s3")), server: "s2", reason: "sealed: host-s3"},
		{name: "vault 5 other sealed", h: cluster(Vault, 5, sealed("s1")), server: "s2", reason: "sealed"},
		{name: "unknown server", h: cluster(Nomad, 3), server: "s9", reason: "not in the Raft configuration"},
		{name: "read error", h: ClusterHealth{Product: Vault, Err: errors.New("connection refused")}, server: "s1", reason: "health unknown: connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := PreRebootGate(tc.h, tc.server)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("PreRebootGate = %v, %q; want %v, ~%q", ok, reason, tc.ok, tc.reason)
			}
		})
	}
}

// A healthy flag that contradicts the servers (a race between reads) closes the gate.
func TestPreRebootGateClusterFlag(t *testing.T) {
	h := cluster(Nomad, 5)
	h.Healthy = false
	if ok, reason := PreRebootGate(h, "s2"); ok || !strings.Contains(reason, "cluster not healthy") {
		t.Fatalf("got %v %q", ok, reason)
	}
}

func TestPostRebootGate(t *testing.T) {
	now := t0.Add(time.Minute)
	tests := []struct {
		name   string
		h      ClusterHealth
		server string
		stable time.Duration
		ok     bool
		reason string
	}{
		{name: "back and stable", h: cluster(Nomad, 3), server: "s2", stable: 30 * time.Second, ok: true},
		{name: "stable exactly", h: cluster(Consul, 5), server: "s2", stable: time.Minute, ok: true},
		{name: "not stable long enough", h: cluster(Nomad, 3), server: "s2", stable: 2 * time.Minute, reason: "healthy since 2026-01-01T12:00:00Z, not yet stable for 2m0s"},
		{name: "not healthy yet", h: cluster(Nomad, 3, unhealthy("s2")), server: "s2", reason: "not healthy yet"},
		{name: "other unhealthy", h: cluster(Nomad, 5, unhealthy("s4")), server: "s2", reason: "cluster not healthy"},
		{name: "not back in configuration", h: cluster(Nomad, 3), server: "s7", reason: "not back in the Raft configuration"},
		{name: "vault sealed needs unseal", h: cluster(Vault, 3, sealed("s2")), server: "s2", reason: "an unseal is needed"},
		{name: "vault unsealed", h: cluster(Vault, 3), server: "s2", ok: true},
		{name: "no leader", h: cluster(Consul, 3, func(h *ClusterHealth) { h.Leader = "" }), server: "s2", reason: "no leader"},
		{name: "read error", h: ClusterHealth{Product: Nomad, Err: errors.New("403")}, server: "s2", reason: "health unknown"},
		{name: "zero stable since", h: cluster(Nomad, 3, func(h *ClusterHealth) { h.Servers[1].StableSince = time.Time{} }), server: "s2", reason: "not yet reported stable (needs 0s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := PostRebootGate(tc.h, tc.server, now, tc.stable)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("PostRebootGate = %v, %q; want %v, ~%q", ok, reason, tc.ok, tc.reason)
			}
			// A closed gate says the same a moment later on the same
			// clusters: its reason is stored in the host's plan, and one
			// that moved with the clock rewrote the plan at every pass.
			if later, again := PostRebootGate(tc.h, tc.server, now.Add(time.Second), tc.stable); !ok && (later || again != reason) {
				t.Errorf("a second later: %v, %q; want false, %q", later, again, reason)
			}
		})
	}
}

func TestNeedsHandOver(t *testing.T) {
	tests := []struct {
		name   string
		h      ClusterHealth
		server string
		want   bool
	}{
		{name: "leader", h: cluster(Nomad, 3), server: "s1", want: true},
		{name: "follower", h: cluster(Nomad, 3), server: "s2"},
		{name: "leader flag only", h: cluster(Consul, 3, func(h *ClusterHealth) { h.Leader = "" }), server: "s1", want: true},
		{name: "vault active", h: cluster(Vault, 5, func(h *ClusterHealth) { h.Leader = "s3"; h.Servers[0].Leader = false }), server: "s3", want: true},
		{name: "unknown", h: cluster(Nomad, 3), server: "s9"},
		{name: "read error", h: ClusterHealth{Err: errors.New("x"), Leader: "s1"}, server: "s1"},
		{name: "empty id", h: ClusterHealth{}, server: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsHandOver(tc.h, tc.server); got != tc.want {
				t.Fatalf("NeedsHandOver = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeniedError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &DeniedError{Product: Nomad, Op: "transfer leadership", Need: "a management token", Err: errors.New("403")})
	var d *DeniedError
	if !errors.Is(err, ErrDenied) || !errors.As(err, &d) || d.Product != Nomad {
		t.Fatalf("not a denied error: %v", err)
	}
	if !strings.Contains(err.Error(), "management token") {
		t.Fatalf("message: %v", err)
	}
}

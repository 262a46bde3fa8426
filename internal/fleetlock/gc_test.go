package fleetlock

import (
	"slices"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestStale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	owned := func(host, id, node string) store.HostRecord {
		return store.HostRecord{Host: host, FleetLockID: id, NodeID: node, Roles: []string{store.RoleFleetLock}}
	}
	agent := store.HostRecord{Host: "agent-1", FleetLockID: "x", Roles: []string{store.RoleNomadClient}, AgentVersion: "1"}
	recs := []store.HostRecord{
		owned("client-1", "n1", "node-1"), // node meta still names it
		owned("client-2", "n2", "node-2"), // meta removed
		owned("client-3", "n3", "node-3"), // meta moved to another node
		owned("fleetlock-a", "a", ""),     // allowed
		owned("fleetlock-b", "b", ""),     // no longer allowed
		owned("fleetlock-c", "c", ""),     // no longer allowed, holds a slot
		owned("fleetlock-other", "a", ""), // an allowed id under another name
		agent,                             // an agent's record: never touched
	}
	byID := map[string]string{"n1": "client-1", "n3": "client-9"}
	allowed := map[string]bool{"a": true}
	plans := map[string]store.Plan{"fleetlock-c": {Host: "fleetlock-c", Phase: store.PhaseRebooting}}
	names := func(rs []store.HostRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Host)
		}
		return out
	}
	since := map[string]time.Time{"gone": t0}
	for _, tt := range []struct {
		name string
		now  time.Time
		want []string
	}{
		{"first seen: grace starts", t0, nil},
		{"within the grace", t0.Add(59 * time.Minute), nil},
		{"after the grace, slot holders kept", t0.Add(time.Hour), []string{"client-2", "client-3", "fleetlock-b", "fleetlock-other"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := names(Stale(recs, plans, byID, allowed, since, tt.now, time.Hour))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("stale %v, want %v", got, tt.want)
			}
		})
	}
	if _, ok := since["gone"]; ok {
		t.Error("a host without a record is still remembered")
	}
	if _, ok := since["client-1"]; ok {
		t.Error("a backed record is remembered as unbacked")
	}
	// Backed again: the grace starts over.
	byID["n2"] = "client-2"
	Stale(recs, plans, byID, allowed, since, t0.Add(2*time.Hour), time.Hour)
	delete(byID, "n2")
	if got := names(Stale(recs, plans, byID, allowed, since, t0.Add(2*time.Hour+time.Minute), time.Hour)); slices.Contains(got, "client-2") {
		t.Fatalf("client-2 deleted a minute after it lost its backing again: %v", got)
	}
}

func TestNodelessFull(t *testing.T) {
	groups := map[string]string{"fleetlock-a": "g", "fleetlock-b": "g", "fleetlock-c": "h", "fleetlock-me": "g"}
	req := func(hosts ...string) map[string]store.Request {
		m := map[string]store.Request{}
		for _, h := range hosts {
			m[h] = store.Request{}
		}
		return m
	}
	for _, tt := range []struct {
		name     string
		busy     map[string]bool
		requests map[string]store.Request
		max      int
		full     bool
	}{
		{"empty", nil, nil, 1, false},
		{"one holder", map[string]bool{"fleetlock-a": true}, nil, 1, true},
		{"one holder of two", map[string]bool{"fleetlock-a": true}, nil, 2, false},
		{"one request", nil, req("fleetlock-b"), 1, true},
		{"holder with its request counts once", map[string]bool{"fleetlock-a": true}, req("fleetlock-a"), 2, false},
		{"another group", nil, req("fleetlock-c"), 1, false},
		{"a host with a node", nil, req("client-1"), 1, false},
		{"itself", map[string]bool{"fleetlock-me": true}, req("fleetlock-me"), 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodelessFull("fleetlock-me", "g", tt.busy, tt.requests, groups, tt.max); got != tt.full {
				t.Fatalf("full = %v, want %v", got, tt.full)
			}
		})
	}
}

func TestReplaceName(t *testing.T) {
	for _, tt := range []struct{ text, name, want string }{
		{"behind web-1 in group", "web-1", "behind another host in group"},
		{"behind web-10 in group", "web-1", "behind web-10 in group"},
		{"web-1", "web-1", "another host"},
		{"xweb-1 and web-1.", "web-1", "xweb-1 and another host."},
	} {
		if got := replaceName(tt.text, tt.name); got != tt.want {
			t.Errorf("replaceName(%q, %q) = %q, want %q", tt.text, tt.name, got, tt.want)
		}
	}
}

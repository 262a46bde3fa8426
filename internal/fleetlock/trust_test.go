package fleetlock_test

// A host speaks only for itself (shared DESIGN.md, "Trust"): the FleetLock id of
// a host comes from the node meta or the allow-list, before any record, and an
// agent-written record counts only when it names its own node.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/fleetlock"
	"github.com/rollboot/rollboot/internal/store"
)

// putAgentRecord writes a host record as an agent (any host holding the agent
// token can write any record under hosts/) that publishes id.
func (e *env) putAgentRecord(host, nodeID, id string) {
	e.t.Helper()
	rec := store.HostRecord{Host: host, NodeID: nodeID, Roles: []string{store.RoleNomadClient},
		FleetLockID: id, AgentVersion: "test"}
	if h, ok := e.sim.Host(host); ok {
		rec.BootID = h.BootID
	}
	if _, err := e.st.PutHost(context.Background(), rec); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) nodeID(name string) string {
	e.t.Helper()
	n, err := e.sim.Node(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return n.ID
}

// The remap attack: a CoreOS machine's allow-listed id, published in the record
// of a host with a node (a valid record of its own node), must not turn that
// machine's requests into a slot for that host. The id stays the allow-list's:
// max_nodeless_slots holds, the host is never granted or drained, and the
// allow-listed holder keeps its slot.
func TestRecordCannotRemapAnAllowedID(t *testing.T) {
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	e := newEnvPolicy(t, 2, "fleetlock {\n  allowed_ids = [\""+a+"\", \""+b+"\"]\n}\n", "group \"all\" {\n  concurrency = 2\n}\n")
	e.until(pre, a, "all", 10*time.Second) // a holds the one slot for hosts without a node
	// client-1's agent (compromised) publishes b, in a record of its own node.
	e.putAgentRecord("client-1", e.nodeID("client-1"), b)

	deadline := time.Now().Add(2 * time.Second) // 20 coordinator passes
	for time.Now().Before(deadline) {
		r := e.call(pre, b, "all")
		if r.code == http.StatusOK || r.Kind != fleetlock.KindWaitingForSlot || !strings.Contains(r.Value, "max_nodeless_slots") {
			t.Fatalf("b, remapped by client-1's record, while a holds the nodeless slot: %d %s %s", r.code, r.Kind, r.Value)
		}
		if p := e.plan("client-1"); p.Active() {
			t.Fatalf("client-1 was granted through b's requests: %s", p.Phase)
		}
		e.wait()
	}
	ctl, err := e.st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ctl.Requests["client-1"]; ok {
		t.Fatalf("a reboot of client-1 was asked for through b: %+v", ctl.Requests)
	}
	if _, ok := ctl.Requests[fleetlock.HostPrefix+b]; ok {
		t.Fatal("b's request was stored beyond max_nodeless_slots")
	}
	if p := e.plan(fleetlock.HostPrefix + a); !p.Active() {
		t.Fatalf("a lost its slot: %s", p.Phase)
	}
	if got := e.ignoredClaims(fleetlock.ClaimOverridden); got != 1 {
		t.Errorf("ignored claims (%s) = %v, want 1: reported once", fleetlock.ClaimOverridden, got)
	}
	// Once a is done, b takes the slot as the allow-list's host.
	e.until(steady, a, "all", 10*time.Second)
	e.until(pre, b, "all", 10*time.Second)
	if p := e.plan(fleetlock.HostPrefix + b); !p.Active() {
		t.Fatalf("b holds no slot of its own: %s", p.Phase)
	}
	if p := e.plan("client-1"); p.Active() {
		t.Fatalf("client-1 was granted: %s", p.Phase)
	}
}

// ignoredClaims is rollboot_fleetlock_ignored_claims_total{reason}.
func (e *env) ignoredClaims(reason string) float64 {
	e.t.Helper()
	mfs, err := e.srv.Registry().Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rollboot_fleetlock_ignored_claims_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A record that does not name the Nomad node of its own host backs no id: one
// naming another host's node, one naming no node. A record naming its own node
// does (agent.publish_fleetlock_id). Each ignored claim is reported once.
func TestUnverifiedRecordBacksNoID(t *testing.T) {
	e := newEnv(t, 2, "")
	ctx := context.Background()
	other, none, own := "dddddddddddddddddddddddddddddddd", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "ffffffffffffffffffffffffffffffff"
	e.putAgentRecord("client-2", e.nodeID("client-1"), other) // names client-1's node
	e.putAgentRecord("storage-1", "", none)                   // names no node
	for range 3 {
		for _, id := range []string{other, none} {
			if r := e.call(pre, id, "default"); r.code != http.StatusForbidden || r.Kind != fleetlock.KindUnknownID {
				t.Fatalf("an id only an unverified record publishes: %d %s %s", r.code, r.Kind, r.Value)
			}
		}
	}
	ctl, err := e.st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctl.Requests) != 0 {
		t.Fatalf("requests stored for unverified claims: %+v", ctl.Requests)
	}
	if got := e.ignoredClaims(fleetlock.ClaimUnverified); got != 2 {
		t.Errorf("ignored claims (%s) = %v, want 2: each reported once", fleetlock.ClaimUnverified, got)
	}
	e.putAgentRecord("client-1", e.nodeID("client-1"), own)
	if r := e.call(pre, own, "default"); r.code == http.StatusForbidden {
		t.Fatalf("the id of a record naming its own node: %d %s %s", r.code, r.Kind, r.Value)
	}
	ctl, err = e.st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := ctl.Requests["client-1"]; !ok || r.By != fleetlock.RequestBy+own {
		t.Fatalf("no request for client-1 from its published id: %+v", ctl.Requests)
	}
}

// An id that is both a node's meta and on the allow-list names two hosts by the
// operator's own sources: refused, nothing stored, until an operator picks one.
func TestNodeMetaAndAllowListConflict(t *testing.T) {
	x := "abcdefabcdefabcdefabcdefabcdefab"
	e := newEnv(t, 1, allow(x))
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: x}); err != nil {
		t.Fatal(err)
	}
	for _, endpoint := range []string{pre, steady} {
		r := e.call(endpoint, x, "default")
		if r.code != http.StatusConflict || r.Kind != fleetlock.KindIdentityConflict {
			t.Fatalf("%s for an id of a node's meta and of the allow-list: %d %s %s", endpoint, r.code, r.Kind, r.Value)
		}
		if strings.Contains(r.Value, x) || strings.Contains(r.Value, "client-1") {
			t.Fatalf("the conflict answer names the id or the node: %s", r.Value)
		}
	}
	hosts, _, err := e.st.Hosts(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := e.st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 0 || len(ctl.Requests) != 0 {
		t.Fatalf("state written for a conflicting id: %+v %+v", hosts, ctl.Requests)
	}
}

// Refusals do not repeat what the client asked for: an unknown id, even one
// that is the name of a host, is not echoed (nor replaced by "another host",
// which would tell that the name is a host's); nor is an unknown group.
func TestRefusalsDoNotEcho(t *testing.T) {
	e := newEnv(t, 1, "")
	e.putAgentRecord("client-1", e.nodeID("client-1"), "")
	for _, id := range []string{"client-1", randomID(t)} {
		for _, endpoint := range []string{pre, steady} {
			r := e.call(endpoint, id, "default")
			if r.code != http.StatusForbidden || r.Kind != fleetlock.KindUnknownID {
				t.Fatalf("%s for unknown id %s: %d %s %s", endpoint, id, r.code, r.Kind, r.Value)
			}
			if strings.Contains(r.Value, id) || strings.Contains(r.Value, "another host") {
				t.Fatalf("the unknown_id answer for %s says too much: %s", id, r.Value)
			}
		}
	}
	const group = "secret-group-name"
	if r := e.call(pre, randomID(t), group); r.Kind != fleetlock.KindUnknownGroup || strings.Contains(r.Value, group) {
		t.Fatalf("an unknown group: %d %s %s", r.code, r.Kind, r.Value)
	}
}

// The FleetLock listener faces the machines; the metrics name every host. It
// serves /metrics only when fleetlock.serve_metrics asks for it.
func TestMetricsOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		name string
		hcl  string
		want int
	}{
		{"default", "", http.StatusNotFound},
		{"serve_metrics = false", "fleetlock {\n  serve_metrics = false\n}\n", http.StatusNotFound},
		{"serve_metrics = true", "fleetlock {\n  serve_metrics = true\n}\n", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 0, tt.hcl)
			e.call(steady, randomID(t), "default") // a request counted in the metrics
			url := strings.TrimSuffix(e.base, "/") + fleetlock.PathMetrics
			if tt.want != http.StatusOK {
				// 404 not_found, a {kind,value} as for any path that is not FleetLock's.
				if r := e.raw(http.MethodGet, url, false, ""); r.code != tt.want || r.Kind != fleetlock.KindNotFound {
					t.Fatalf("GET /metrics: %d %s", r.code, r.Kind)
				}
				return
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want || !strings.Contains(string(b), "rollboot_fleetlock_requests_total") {
				t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, b)
			}
		})
	}
}

// The name of an allow-listed id's host is the server's: a record another
// writer left there (here one naming client-1's node) is taken back and made
// the server's own (no agent, no node), and client-1 is not touched.
func TestAllowListedNameIsTheServers(t *testing.T) {
	a := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	e := newEnv(t, 1, allow(a))
	host := fleetlock.HostPrefix + a
	e.putAgentRecord(host, e.nodeID("client-1"), a)
	e.until(pre, a, "default", 10*time.Second)
	rec := e.host(host)
	if rec.AgentVersion != "" || rec.NodeID != "" || len(rec.Roles) != 1 || rec.Roles[0] != store.RoleFleetLock {
		t.Fatalf("the record of %s after the server wrote it: %+v", host, rec)
	}
	if p := e.plan("client-1"); p.Active() {
		t.Fatalf("client-1 was granted: %s", p.Phase)
	}
	if got := e.ignoredClaims(fleetlock.ClaimOverridden); got != 1 {
		t.Errorf("ignored claims (%s) = %v, want 1", fleetlock.ClaimOverridden, got)
	}
}

package fleetlock_test

// FleetLock is closed by default: only ids an operator backed (a node's meta, an
// agent told to publish, the allow-list) take slots; nothing else leaves state.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/fleetlock"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

func randomID(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A flood of ids nobody backed is refused and writes nothing: no host record,
// no request, no plan.
func TestUnknownIDFloodLeavesNoState(t *testing.T) {
	e := newEnv(t, 1, "fleetlock {\n  rate_limit = 0\n}\n")
	ctx := context.Background()
	before := e.sim.Index()
	for i := range 300 {
		endpoint := pre
		if i%2 == 1 {
			endpoint = steady
		}
		id := randomID(t)
		r := e.call(endpoint, id, "default")
		if r.code != http.StatusForbidden || r.Kind != fleetlock.KindUnknownID {
			t.Fatalf("%s for unknown id %s: %d %s %s", endpoint, id, r.code, r.Kind, r.Value)
		}
		if strings.Contains(r.Value, "client-1") {
			t.Fatalf("the refusal names another host: %s", r.Value)
		}
	}
	hosts, _, err := e.st.Hosts(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 0 {
		t.Errorf("host records after the flood: %+v", hosts)
	}
	ctl, err := e.st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctl.Requests) != 0 || len(ctl.Cancels) != 0 || len(ctl.Releases) != 0 {
		t.Errorf("control after the flood: %+v", ctl)
	}
	plans, err := e.st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 0 {
		t.Errorf("plans after the flood: %+v", plans)
	}
	for _, ev := range e.sim.Events(0) {
		if ev.Index > before && strings.HasPrefix(ev.Type, "node.drain") {
			t.Errorf("a drain during the flood: %+v", ev)
		}
	}
}

func TestRateLimited(t *testing.T) {
	e := newEnv(t, 0, "fleetlock {\n  rate_limit = 1\n}\n")
	id := randomID(t)
	start := time.Now()
	answered, limited := 0, 0
	for i := range 20 {
		r := e.call(steady, id, "default")
		switch r.Kind {
		case fleetlock.KindRateLimited:
			if r.code != http.StatusTooManyRequests {
				t.Fatalf("rate_limited with %d", r.code)
			}
			limited++
		case fleetlock.KindUnknownID:
			answered++
		default:
			t.Fatalf("call %d: %d %s %s", i, r.code, r.Kind, r.Value)
		}
	}
	// A burst of two, then one a second: the rest is refused before any Nomad
	// call.
	if most := 2 + int(time.Since(start).Seconds()) + 1; answered > most || limited == 0 {
		t.Fatalf("20 calls in %s with rate_limit 1: %d answered, %d limited", time.Since(start), answered, limited)
	}
}

// Hosts without a node hold at most max_nodeless_slots slots of a group, even
// when the group has more; a host with a node still gets the group's other slot.
// Refusals never name the other hosts.
func TestNodelessSlotsBounded(t *testing.T) {
	a, b, c := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"
	e := newEnvPolicy(t, 1, "fleetlock {\n  allowed_ids = [\""+a+"\", \""+b+"\"]\n}\n", "group \"all\" {\n  concurrency = 2\n}\n")
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: c}); err != nil {
		t.Fatal(err)
	}
	e.until(pre, a, "all", 10*time.Second)
	for range 5 {
		r := e.call(pre, b, "all")
		if r.code == 200 || r.Kind != fleetlock.KindWaitingForSlot || !strings.Contains(r.Value, "max_nodeless_slots") {
			t.Fatalf("b while a holds the one slot for hosts without a node: %d %s %s", r.code, r.Kind, r.Value)
		}
		if strings.Contains(r.Value, a) {
			t.Fatalf("b's answer names a: %s", r.Value)
		}
		e.wait()
	}
	ctl, _ := e.st.Control(context.Background())
	if _, ok := ctl.Requests[fleetlock.HostPrefix+b]; ok {
		t.Fatal("b's request was stored beyond max_nodeless_slots")
	}
	// The node-backed client takes the group's second slot.
	e.until(pre, c, "all", 20*time.Second)
	if p := e.plan(fleetlock.HostPrefix + a); !p.Active() {
		t.Fatalf("a lost its slot: %s", p.Phase)
	}
	// Once a is done, b gets its turn.
	e.until(steady, a, "all", 10*time.Second)
	e.until(pre, b, "all", 10*time.Second)
}

// With a group of one slot, a waiting client learns why, without the names of
// the host that holds the slot or of the one queued before it.
func TestAnswersDoNotNameOtherHosts(t *testing.T) {
	a, b, c := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"
	e := newEnv(t, 1, "fleetlock {\n  allowed_ids = [\""+b+"\", \""+c+"\"]\n  max_nodeless_slots = 2\n}\n")
	ctx := context.Background()
	h, _ := e.sim.Host("client-1")
	node, _ := e.sim.Node("client-1")
	// An agent host holds the slot.
	rec := store.HostRecord{Host: "client-1", NodeID: node.ID, Roles: []string{store.RoleNomadClient}, BootID: h.BootID,
		RebootRequired: true, Reason: "test", RequestedAt: time.Now().UTC(), AgentVersion: "test", FleetLockID: a}
	if _, err := e.st.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	e.waitFor("client-1 granted", func() bool { return e.plan("client-1").Active() })
	// c queues first, then b behind it.
	e.call(pre, c, "default")
	e.waitFor("c pending", func() bool { return e.plan(fleetlock.HostPrefix+c).Phase == store.PhasePending })
	e.call(pre, b, "default")
	e.waitFor("b waiting behind c", func() bool {
		p := e.plan(fleetlock.HostPrefix + b)
		return p.Phase == store.PhasePending && p.RequestedAt.After(e.plan(fleetlock.HostPrefix+c).RequestedAt)
	})
	for range 5 {
		r := e.call(pre, b, "default")
		if r.code == 200 {
			t.Fatal("b got the held slot")
		}
		if strings.Contains(r.Value, "client-1") || strings.Contains(r.Value, fleetlock.HostPrefix+c) {
			t.Fatalf("b's answer names another host: %s", r.Value)
		}
		if !strings.Contains(r.Value, "queued for a slot") {
			t.Errorf("b's answer does not say what it waits for: %s", r.Value)
		}
		e.wait()
	}
}

// A client that says steady-state while its node is drained, before it was ever
// told it may reboot, did not and will not reboot for that grant: the slot is
// released, no reboot is recorded, and the node gets its eligibility back.
func TestSteadyStateBeforeGrantReleases(t *testing.T) {
	e := newEnv(t, 1, "")
	id := "975228d46dc94622b9bbe16671e2b58d"
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: id}); err != nil {
		t.Fatal(err)
	}
	h, _ := e.sim.Host("client-1")
	if r := e.call(pre, id, "default"); r.code == 200 {
		t.Fatal("200 at the first pre-reboot: no drain yet")
	}
	e.waitFor("client-1 drained", func() bool { return e.plan("client-1").Phase == store.PhaseDrained })
	r := e.call(steady, id, "default")
	if r.code == 200 || r.Kind != fleetlock.KindWaitingForRejoin {
		t.Fatalf("steady-state of a drained holder: %d %s %s", r.code, r.Kind, r.Value)
	}
	e.until(steady, id, "default", 20*time.Second)
	if p := e.plan("client-1"); p.Phase != store.PhaseIdle {
		t.Fatalf("plan after the release: %s", p.Phase)
	}
	if got := e.outcomes("client-1"); !slices.Equal(got, []string{"released"}) {
		t.Errorf("history: %v, want [released]", got)
	}
	if n, _ := e.sim.Node("client-1"); n.SchedulingEligibility != api.NodeSchedulingEligible {
		t.Errorf("node eligibility after the release: %s", n.SchedulingEligibility)
	}
	if now, _ := e.sim.Host("client-1"); now.BootID != h.BootID {
		t.Error("the host rebooted")
	}
}

// A client told it may reboot that says steady-state before Nomad saw its node
// reboot: the reboot may still come, so nothing is given back. No reboot is
// recorded and the node stays ineligible until the reboot is seen.
func TestSteadyStateBeforeRebootKeepsNodeOut(t *testing.T) {
	e := newEnv(t, 1, "")
	id := "975228d46dc94622b9bbe16671e2b58d"
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: id}); err != nil {
		t.Fatal(err)
	}
	e.until(pre, id, "default", 20*time.Second)
	// Several coordinator passes (resync 100ms) while the client insists.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		r := e.call(steady, id, "default")
		if r.code == 200 || r.Kind != fleetlock.KindWaitingForRejoin {
			t.Fatalf("steady-state before the reboot: %d %s %s", r.code, r.Kind, r.Value)
		}
		if n, _ := e.sim.Node("client-1"); n.SchedulingEligibility != api.NodeSchedulingIneligible {
			t.Fatalf("the node was made %s while its reboot may still come", n.SchedulingEligibility)
		}
		if p := e.plan("client-1"); !p.Active() {
			t.Fatalf("the slot was given back (%s) while the reboot may still come", p.Phase)
		}
		e.wait()
	}
	if got := e.outcomes("client-1"); len(got) != 0 {
		t.Fatalf("history before any reboot: %v", got)
	}
	// The reboot does come; then steady-state ends the cycle as usual.
	if err := e.sim.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	e.until(steady, id, "default", 30*time.Second)
	if n, _ := e.sim.Node("client-1"); n.SchedulingEligibility != api.NodeSchedulingEligible {
		t.Errorf("node eligibility at the end: %s", n.SchedulingEligibility)
	}
	if got := e.outcomes("client-1"); !slices.Equal(got, []string{"rebooted"}) {
		t.Errorf("history: %v", got)
	}
}

// A holder without a node that says steady-state before it was told to reboot
// releases its slot without a reboot on record.
func TestNodelessSteadyStateBeforeGrant(t *testing.T) {
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	e := newEnv(t, 0, allow(a, b))
	host := fleetlock.HostPrefix + a
	if r := e.call(pre, a, "default"); r.code == 200 {
		t.Fatal("200 before the coordinator granted")
	}
	e.waitFor("a granted", func() bool { return e.plan(host).Phase == store.PhaseDrained })
	e.until(steady, a, "default", 10*time.Second)
	if got := e.outcomes(host); !slices.Equal(got, []string{"released"}) {
		t.Errorf("history: %v, want [released]", got)
	}
	e.until(pre, b, "default", 10*time.Second) // the slot is free again
}

// A slow Nomad makes a request fail with a 500 {kind,value} at the handler's
// deadline, long before the server's write timeout.
func TestHandlerDeadline(t *testing.T) {
	e := newEnv(t, 1, "fleetlock {\n  request_timeout = \"1s\"\n}\n")
	if err := e.sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/nodes", Latency: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.call(pre, randomID(t), "default") // fails on the JSON check if the body is not {kind,value}
	took := time.Since(start)
	if r.code != http.StatusInternalServerError || r.Kind != fleetlock.KindInternal || !strings.Contains(r.Value, "within 1s") {
		t.Fatalf("with a slow Nomad: %d %s %q", r.code, r.Kind, r.Value)
	}
	if took > 10*time.Second {
		t.Fatalf("the answer took %s", took)
	}
	e.sim.ClearFaults()
}

// Records the server wrote are deleted once nothing backs them for the grace
// period; backed ones stay.
func TestCollectStaleRecords(t *testing.T) {
	a := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	c := "cccccccccccccccccccccccccccccccc"
	e := newEnv(t, 1, "fleetlock {\n  allowed_ids = [\""+a+"\"]\n  record_grace = \"1s\"\n}\n")
	ctx := context.Background()
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: c}); err != nil {
		t.Fatal(err)
	}
	e.until(steady, a, "default", 10*time.Second)
	e.until(steady, c, "default", 10*time.Second)
	e.host("client-1")
	e.host(fleetlock.HostPrefix + a)
	if del, err := e.srv.Collect(ctx); err != nil || len(del) != 0 {
		t.Fatalf("collect with every record backed: %v, %v", del, err)
	}
	// The operator takes the id off the node.
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: ""}); err != nil {
		t.Fatal(err)
	}
	if del, err := e.srv.Collect(ctx); err != nil || len(del) != 0 {
		t.Fatalf("collected within the grace period: %v, %v", del, err)
	}
	if r := e.call(steady, c, "default"); r.Kind != fleetlock.KindUnknownID {
		t.Fatalf("the id without its meta: %d %s", r.code, r.Kind)
	}
	e.waitFor("the stale record deleted", func() bool {
		del, err := e.srv.Collect(ctx)
		return err == nil && slices.Equal(del, []string{"client-1"})
	})
	if _, err := e.st.Host(ctx, "client-1"); err == nil {
		t.Fatal("the record of client-1 is still there")
	}
	e.host(fleetlock.HostPrefix + a) // backed by the allow-list: kept
}

// A record that claims the FleetLock id of another node is ignored: the request
// of that node's machine drains that node, never the claimant.
func TestNodeMetaWinsOverAClaimingRecord(t *testing.T) {
	e := newEnv(t, 2, "")
	ctx := context.Background()
	id := "975228d46dc94622b9bbe16671e2b58d"
	if err := e.sim.SetNodeMeta("client-2", map[string]string{fleetlock.NodeMetaKey: id}); err != nil {
		t.Fatal(err)
	}
	h, _ := e.sim.Host("client-1")
	node, _ := e.sim.Node("client-1")
	// client-1's agent (compromised, or misconfigured) claims client-2's id.
	if _, err := e.st.PutHost(ctx, store.HostRecord{Host: "client-1", NodeID: node.ID, Roles: []string{store.RoleNomadClient},
		BootID: h.BootID, FleetLockID: id, AgentVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	e.until(pre, id, "default", 20*time.Second)
	if p := e.plan("client-2"); p.Phase != store.PhaseDrained && p.Phase != store.PhaseRebooting {
		t.Fatalf("client-2 (the node with the id) is %s", p.Phase)
	}
	if p := e.plan("client-1"); p.Active() {
		t.Fatalf("the claimant client-1 was granted: %s", p.Phase)
	}
	if n, _ := e.sim.Node("client-1"); n.SchedulingEligibility != api.NodeSchedulingEligible {
		t.Fatalf("the claimant's node is %s", n.SchedulingEligibility)
	}
}

// The groups are the stored policy's, read for each request: a group applied
// after the server started is known at once, and a stored policy that cannot be
// used answers 500 (the client retries) rather than falling back to defaults.
func TestGroupsFromTheStoredPolicy(t *testing.T) {
	const a = "abababababababababababababababab"
	e := newEnv(t, 0, allow(a))
	if r := e.call(steady, a, "late"); r.code != 400 || r.Kind != fleetlock.KindUnknownGroup {
		t.Fatalf("a group no policy names: %d %s", r.code, r.Kind)
	}
	ch, err := storedpolicy.Prepare(t.Context(), e.st, nil, []byte("group \"late\" {}\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ch.Apply(t.Context(), e.st, "test", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.call(steady, a, "late"); r.code != 200 {
		t.Fatalf("a group of the stored policy: %d %s %s", r.code, r.Kind, r.Value)
	}
	bad := store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 2, Source: "group \"late\" {\n  concurrency = 0\n}\n", Filename: "p.hcl"}}
	if _, err := e.st.PutPolicy(t.Context(), bad, rec.ModifyIndex); err != nil {
		t.Fatal(err)
	}
	if r := e.call(steady, a, "late"); r.code != 500 || r.Kind != fleetlock.KindInternal || !strings.Contains(r.Value, "stored policy cannot be used") {
		t.Fatalf("under an invalid stored policy: %d %s %q", r.code, r.Kind, r.Value)
	}
}

package fleetlock_test

// A conformance suite that speaks FleetLock the way Zincati does (no Content-Type,
// pretty-printed JSON, retrying until a 200) against the handler backed by the real
// store on the Nomad emulator, with a coordinator running in-process.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/fleetlock"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

type env struct {
	t    *testing.T
	sim  *nomadsim.Sim
	st   *store.Store
	srv  *fleetlock.Server
	base string // the base URL, as in Zincati's base_url (with its trailing slash)
}

// newEnv starts an emulated cluster, a coordinator and the FleetLock server with
// the given extra HCL (a fleetlock block).
func newEnv(t *testing.T, clients int, hcl string) *env {
	t.Helper()
	return newEnvPolicy(t, clients, hcl, "")
}

// newEnvPolicy is newEnv with a stored policy (groups), applied first.
func newEnvPolicy(t *testing.T, clients int, hcl, pol string) *env {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Clients: clients, HeartbeatTTL: 150 * time.Millisecond,
		BootTime: 300 * time.Millisecond, MigrateTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	src := fmt.Sprintf("nomad {\n  address = %q\n}\ncoordinator {\n  resync_interval = \"100ms\"\n}\n%s\n", sim.Address(), hcl)
	cfg, err := config.LoadBytes([]byte(src), "test.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hcl, "rate_limit") {
		// The suite polls faster than a fleet of Zincati clients; the limit
		// has tests of its own.
		cfg.FleetLock.RateLimit = 0
	}
	client, err := daemon.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st := daemon.Store(cfg, client)
	if pol != "" {
		ch, err := storedpolicy.Prepare(context.Background(), st, client.Nodes(), []byte(pol), "policy.hcl")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Apply(context.Background(), st, "test", time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	co := daemon.Coordinator(cfg, client, st, log, nil)
	srv, err := daemon.FleetLockServer(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = co.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return &env{t: t, sim: sim, st: st, srv: srv, base: hs.URL + fleetlock.NormalizePrefix(cfg.FleetLock.PathPrefix) + "/"}
}

// allow is the configuration that lets ids hold slots without a Nomad node.
func allow(ids ...string) string {
	q := make([]string, 0, len(ids))
	for _, id := range ids {
		q = append(q, strconv.Quote(id))
	}
	return "fleetlock {\n  allowed_ids = [" + strings.Join(q, ", ") + "]\n}\n"
}

// body is what Zincati sends: pretty-printed JSON (serde_json::to_string_pretty).
func body(id, group string) string {
	return fmt.Sprintf("{\n  \"client_params\": {\n    \"id\": %q,\n    \"group\": %q\n  }\n}", id, group)
}

type reply struct {
	code int
	fleetlock.ErrorBody
}

// raw sends one request as Zincati does: POST, the protocol header, no Content-Type.
func (e *env) raw(method, url string, header bool, payload string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(payload))
	if err != nil {
		e.t.Fatal(err)
	}
	if header {
		req.Header.Set("fleet-lock-protocol", "true")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{code: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &r.ErrorBody); err != nil || r.Kind == "" || !slices.Contains(fleetlock.Kinds, r.Kind) {
			e.t.Fatalf("%s %s: %d with body %q: not a {kind,value} of a documented kind", method, url, resp.StatusCode, b)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			e.t.Fatalf("%s %s: non-200 success code %d", method, url, resp.StatusCode)
		}
	}
	return r
}

func (e *env) call(endpoint, id, group string) reply {
	e.t.Helper()
	return e.raw(http.MethodPost, e.base+endpoint, true, body(id, group))
}

const (
	pre    = "v1/pre-reboot"
	steady = "v1/steady-state"
)

// wait lets the cluster move (no fixed sleeps: it returns as soon as the emulator
// changes, or after 50ms).
func (e *env) wait() {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	e.sim.WaitIndex(ctx, e.sim.Index())
	cancel()
}

// until retries a call, as Zincati does, until it gets a 200; it returns the kinds
// of the refusals seen on the way.
func (e *env) until(endpoint, id, group string, timeout time.Duration) []string {
	e.t.Helper()
	var kinds []string
	deadline := time.Now().Add(timeout)
	for {
		r := e.call(endpoint, id, group)
		if r.code == http.StatusOK {
			return kinds
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != r.Kind {
			kinds = append(kinds, r.Kind)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s for %s: no 200 within %s; last %d %s: %s", endpoint, id, timeout, r.code, r.Kind, r.Value)
		}
		e.wait()
	}
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		e.wait()
	}
}

func (e *env) plan(host string) store.Plan {
	p, err := e.st.Plan(context.Background(), host)
	if err != nil {
		return store.Plan{Host: host, Phase: store.PhaseIdle}
	}
	return p
}

func (e *env) host(name string) store.HostRecord {
	e.t.Helper()
	h, err := e.st.Host(context.Background(), name)
	if err != nil {
		e.t.Fatalf("host record %s: %v", name, err)
	}
	return h
}

func (e *env) outcomes(host string) []string {
	h, _ := e.st.History(context.Background())
	var out []string
	for _, r := range h {
		if r.Host == host {
			out = append(out, r.Outcome)
		}
	}
	return out
}

// monitor records the largest number of hosts holding a slot in group at once.
func (e *env) monitor(group string) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	most := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// Plans are read one variable at a time: count only snapshots with
			// no write in between (the emulator's Raft index did not move),
			// or a torn read could pair one host's old plan with another's new.
			before := e.sim.Index()
			plans, err := e.st.Plans(ctx)
			if err == nil && e.sim.Index() == before {
				n := 0
				for _, p := range plans {
					if p.Active() && p.Group == group {
						n++
					}
				}
				mu.Lock()
				most = max(most, n)
				mu.Unlock()
			}
			c, cc := context.WithTimeout(ctx, 20*time.Millisecond)
			e.sim.WaitIndex(c, e.sim.Index())
			cc()
		}
	}()
	stop := func() int {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return most
	}
	e.t.Cleanup(func() { stop() })
	return stop
}

func TestProtocolErrors(t *testing.T) {
	e := newEnvPolicy(t, 0, "fleetlock {\n  path_prefix = \"/fleet_lock\"\n  max_body_bytes = 1024\n  allowed_ids = [\"0123456789abcdef0123456789abcdef\"]\n  serve_metrics = true\n}\n",
		"group \"workers\" {\n  filter = \"NodePool == \\\"workers\\\"\"\n}\n")
	id := "0123456789abcdef0123456789abcdef"
	for _, tt := range []struct {
		name    string
		method  string
		url     string
		header  bool
		payload string
		code    int
		kind    string
	}{
		{"no header", http.MethodPost, e.base + steady, false, body(id, "default"), 400, fleetlock.KindMissingHeader},
		{"bad group", http.MethodPost, e.base + steady, true, body(id, "bad_group"), 400, fleetlock.KindBadRequest},
		{"unknown group", http.MethodPost, e.base + steady, true, body(id, "nosuch"), 400, fleetlock.KindUnknownGroup},
		{"empty body", http.MethodPost, e.base + steady, true, "", 400, fleetlock.KindBadRequest},
		{"not JSON", http.MethodPost, e.base + steady, true, "id=1", 400, fleetlock.KindBadRequest},
		{"wrong type", http.MethodPost, e.base + steady, true, `{"client_params":{"id":1,"group":"default"}}`, 400, fleetlock.KindBadRequest},
		{"no id", http.MethodPost, e.base + pre, true, `{"client_params":{"group":"default"}}`, 400, fleetlock.KindBadRequest},
		{"too large", http.MethodPost, e.base + pre, true, body(id, "default") + strings.Repeat(" ", 2000), 413, fleetlock.KindBodyTooLarge},
		{"GET", http.MethodGet, e.base + pre, true, "", 405, fleetlock.KindMethodNotAllowed},
		{"PUT", http.MethodPut, e.base + steady, true, body(id, "default"), 405, fleetlock.KindMethodNotAllowed},
		{"outside the prefix", http.MethodPost, strings.TrimSuffix(e.base, "fleet_lock/") + pre, true, body(id, "default"), 404, fleetlock.KindNotFound},
		{"unknown path", http.MethodPost, e.base + "v2/pre-reboot", true, body(id, "default"), 404, fleetlock.KindNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.raw(tt.method, tt.url, tt.header, tt.payload)
			if r.code != tt.code || r.Kind != tt.kind || r.Value == "" {
				t.Fatalf("got %d %s %q, want %d %s", r.code, r.Kind, r.Value, tt.code, tt.kind)
			}
		})
	}
	// A doubled slash (a base URL given without... or with one slash too many)
	// is served, not redirected; compact JSON works as well as pretty.
	if r := e.raw(http.MethodPost, e.base+"/"+steady, true, `{"client_params":{"id":"`+id+`","group":"workers"}}`); r.code != 200 {
		t.Fatalf("doubled slash: %d %s %s", r.code, r.Kind, r.Value)
	}
	// Release when not held: 200, again and again.
	for range 3 {
		if r := e.call(steady, id, "default"); r.code != 200 {
			t.Fatalf("steady-state when not held: %d %s %s", r.code, r.Kind, r.Value)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(e.base, "fleet_lock/") + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`rollboot_fleetlock_requests_total{code="405",endpoint="pre-reboot",kind="method_not_allowed"} 1`,
		`rollboot_fleetlock_requests_total{code="200",endpoint="steady-state",kind="none"} 4`,
		`rollboot_fleetlock_requests_total{code="413",endpoint="pre-reboot",kind="body_too_large"} 1`,
		`rollboot_fleetlock_request_duration_seconds_count{endpoint="steady-state"}`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
}

// Two slot holders without a node in a group of one slot: recursive lock, the
// second waits while the first holds, release when not held, idempotent release.
func TestSlotHolders(t *testing.T) {
	e := newEnv(t, 0, allow("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"))
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	most := e.monitor("default")

	// Zincati starts: steady-state first, until it succeeds.
	e.until(steady, a, "default", 10*time.Second)
	e.until(steady, b, "default", 10*time.Second)

	kinds := e.until(pre, a, "default", 10*time.Second)
	if len(kinds) == 0 || kinds[0] != fleetlock.KindWaitingForSlot {
		t.Errorf("first pre-reboot refusals %v, want waiting_for_slot first", kinds)
	}
	// Recursive: asking again while held is a 200.
	for range 3 {
		if r := e.call(pre, a, "default"); r.code != 200 {
			t.Fatalf("recursive lock: %d %s %s", r.code, r.Kind, r.Value)
		}
	}
	ha := e.host(fleetlock.HostPrefix + a)
	if ha.FleetLockID != a || !slices.Contains(ha.Roles, store.RoleFleetLock) || ha.Group != "default" {
		t.Errorf("record of a: %+v", ha)
	}
	if p := e.plan(ha.Host); ha.RebootingGrant != p.GrantID || p.GrantID == "" {
		t.Errorf("rebooting grant %q, plan grant %q", ha.RebootingGrant, p.GrantID)
	}
	// The slot is full: b waits, however often it asks.
	for range 10 {
		if r := e.call(pre, b, "default"); r.code != http.StatusLocked || r.Kind != fleetlock.KindWaitingForSlot {
			t.Fatalf("b while a holds: %d %s %s", r.code, r.Kind, r.Value)
		}
		e.wait()
	}
	// a rebooted and is back: steady-state until the cycle is over.
	e.until(steady, a, "default", 10*time.Second)
	if p := e.plan(fleetlock.HostPrefix + a); p.Phase != store.PhaseIdle {
		t.Fatalf("a released with its plan %s", p.Phase)
	}
	e.until(pre, b, "default", 10*time.Second)
	if r := e.call(pre, a, "default"); r.code == 200 {
		t.Fatal("a got a slot while b holds it")
	}
	e.until(steady, b, "default", 10*time.Second)
	// a asked again while b held the slot: by now it may hold the slot (a
	// steady-state then ends that cycle) or still wait (it withdraws the request).
	e.until(steady, a, "default", 10*time.Second)
	if r := e.call(steady, b, "default"); r.code != 200 {
		t.Fatalf("idempotent release: %d %s", r.code, r.Kind)
	}
	if got := e.outcomes(fleetlock.HostPrefix + a); len(got) == 0 || got[0] != "rebooted" {
		t.Errorf("history of a: %v", got)
	}
	// A grant that raced with the withdrawal ends by itself.
	e.waitFor("a idle", func() bool { return e.plan(fleetlock.HostPrefix+a).Phase == store.PhaseIdle })
	if got := e.outcomes(fleetlock.HostPrefix + b); !slices.Equal(got, []string{"rebooted"}) {
		t.Errorf("history of b: %v", got)
	}
	if n := most(); n != 1 {
		t.Errorf("at most %d hosts held a slot of a group of one at once, want 1", n)
	}
	// A second cycle of a works the same (no reboot-loop hold).
	e.until(pre, a, "default", 10*time.Second)
	e.until(steady, a, "default", 10*time.Second)
}

// A Nomad client named by its node meta: drained before the 200, eligible again
// before steady-state succeeds.
func TestNomadClientDrainAndRejoin(t *testing.T) {
	e := newEnv(t, 2, "")
	id := "975228d46dc94622b9bbe16671e2b58d"
	if err := e.sim.SetNodeMeta("client-1", map[string]string{fleetlock.NodeMetaKey: id}); err != nil {
		t.Fatal(err)
	}
	node, _ := e.sim.Node("client-1")
	e.until(steady, id, "default", 10*time.Second)

	kinds := e.until(pre, id, "default", 20*time.Second)
	events := e.sim.Events(0) // everything that happened before the 200
	drained := false
	for _, ev := range events {
		if ev.Type == nomadsim.EventDrainComplete && ev.NodeID == node.ID {
			drained = true
		}
	}
	if !drained {
		t.Fatalf("pre-reboot answered 200 before the drain of %s completed (refusals %v)", node.ID, kinds)
	}
	if !slices.Contains(kinds, fleetlock.KindWaitingForDrain) && !slices.Contains(kinds, fleetlock.KindWaitingForSlot) {
		t.Errorf("refusals before the 200: %v", kinds)
	}
	rec := e.host("client-1")
	if rec.NodeID != node.ID || rec.FleetLockID != id || !slices.Contains(rec.Roles, store.RoleFleetLock) {
		t.Errorf("record: %+v", rec)
	}
	if n, _ := e.sim.Node("client-1"); n.SchedulingEligibility != api.NodeSchedulingIneligible {
		t.Fatalf("node eligibility after the drain: %s", n.SchedulingEligibility)
	}

	// Zincati finalizes and the machine reboots; after boot it reports steady.
	if err := e.sim.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	refused := 0
	for {
		r := e.call(steady, id, "default")
		n, _ := e.sim.Node("client-1")
		if r.code == 200 {
			// Checked after the 200: the node only gets more eligible with time,
			// and nothing else makes it eligible.
			if n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible {
				t.Fatalf("steady-state 200 with the node %s/%s", n.Status, n.SchedulingEligibility)
			}
			break
		}
		if r.Kind != fleetlock.KindWaitingForRejoin {
			t.Fatalf("steady-state during the rejoin: %d %s %s", r.code, r.Kind, r.Value)
		}
		refused++
		if time.Now().After(deadline) {
			t.Fatalf("no 200 for steady-state: %s", r.Value)
		}
		e.wait()
	}
	if refused == 0 {
		t.Error("steady-state succeeded at once: the rejoin was not waited for")
	}
	if got := e.outcomes("client-1"); !slices.Equal(got, []string{"rebooted"}) {
		t.Errorf("history: %v", got)
	}
}

// An agent host and a FleetLock host of the same group share its one slot.
func TestSharedWithAgentHost(t *testing.T) {
	e := newEnv(t, 1, allow("cccccccccccccccccccccccccccccccc"))
	ctx := context.Background()
	most := e.monitor("default")
	h, _ := e.sim.Host("client-1")
	node, _ := e.sim.Node("client-1")
	// The agent of client-1 (played by the test) needs a reboot.
	rec := store.HostRecord{Host: "client-1", NodeID: node.ID, Roles: []string{store.RoleNomadClient}, BootID: h.BootID,
		RebootRequired: true, Reason: "test", RequestedAt: time.Now().UTC(), AgentVersion: "test"}
	idx, err := e.st.PutHost(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.ModifyIndex = idx
	e.waitFor("the agent host to be granted", func() bool { return e.plan("client-1").Active() })

	z := "cccccccccccccccccccccccccccccccc"
	for range 5 {
		if r := e.call(pre, z, "default"); r.code == 200 {
			t.Fatal("the FleetLock host got the slot the agent host holds")
		}
		e.wait()
	}
	// The agent reboots its host once drained and reports its new boot ID.
	e.waitFor("client-1 drained", func() bool { return e.plan("client-1").Phase == store.PhaseDrained })
	rec.RebootingGrant = e.plan("client-1").GrantID
	if rec.ModifyIndex, err = e.st.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("client-1 to boot", func() bool { h, _ := e.sim.Host("client-1"); return h.Up && h.BootID != rec.BootID })
	h, _ = e.sim.Host("client-1")
	rec.BootID, rec.RebootRequired, rec.Reason, rec.RequestedAt = h.BootID, false, "", time.Time{}
	if rec.ModifyIndex, err = e.st.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	e.until(pre, z, "default", 20*time.Second)
	if p := e.plan("client-1"); p.Active() {
		t.Fatalf("the FleetLock host got a slot while client-1 is %s", p.Phase)
	}
	e.until(steady, z, "default", 10*time.Second)
	if n := most(); n != 1 {
		t.Errorf("at most %d hosts held the group's one slot at once, want 1", n)
	}
}

// A host whose agent published the FleetLock id: the server asks for the reboot
// in the control variable and never writes the agent's record.
func TestAgentPublishedID(t *testing.T) {
	e := newEnv(t, 1, "")
	ctx := context.Background()
	id := "dddddddddddddddddddddddddddddddd"
	h, _ := e.sim.Host("client-1")
	node, _ := e.sim.Node("client-1")
	rec := store.HostRecord{Host: "client-1", NodeID: node.ID, Roles: []string{store.RoleNomadClient}, BootID: h.BootID,
		FleetLockID: id, AgentVersion: "test"}
	idx, err := e.st.PutHost(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	e.until(pre, id, "default", 20*time.Second)
	ctl, err := e.st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := ctl.Requests["client-1"]; !ok || r.By != fleetlock.RequestBy+id {
		t.Errorf("control requests: %+v", ctl.Requests)
	}
	if got := e.host("client-1"); got.ModifyIndex != idx {
		t.Errorf("the agent's record was written: %+v", got)
	}
	// Only the agent can end the cycle: steady-state waits for it.
	if r := e.call(steady, id, "default"); r.code == 200 {
		t.Fatal("steady-state 200 while the host holds a slot")
	}
}

// `rollboot release` frees a FleetLock holder: its slot goes to the next client.
func TestReleaseByHand(t *testing.T) {
	e := newEnv(t, 0, allow("eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "ffffffffffffffffffffffffffffffff"))
	ctx := context.Background()
	a, b := "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "ffffffffffffffffffffffffffffffff"
	e.until(pre, a, "default", 10*time.Second)
	if r := e.call(pre, b, "default"); r.code == 200 {
		t.Fatal("b got the held slot")
	}
	// a never comes back. The operator releases it, as `rollboot release` does.
	host := fleetlock.HostPrefix + a
	if _, err := e.st.UpdateControl(ctx, func(c *store.Control) error {
		if c.Releases == nil {
			c.Releases = map[string]time.Time{}
		}
		c.Releases[host] = time.Now().UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.until(pre, b, "default", 10*time.Second)
	if got := e.outcomes(host); !slices.Equal(got, []string{"released"}) {
		t.Errorf("history of a: %v", got)
	}
	if p := e.plan(host); p.Active() {
		t.Errorf("a still holds a slot: %s", p.Phase)
	}
	if r := e.call(pre, a, "default"); r.code == 200 || r.Kind != fleetlock.KindWaitingForSlot {
		t.Errorf("a after the release while b holds: %d %s", r.code, r.Kind)
	}
}

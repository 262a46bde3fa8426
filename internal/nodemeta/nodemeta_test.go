package nodemeta

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func run(t *testing.T, p *Publisher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Against the emulator's /v1/client/metadata: the metadata lands on the nodes,
// node list filters select on it, and nothing is written while nothing changes.
func TestPublishToNomad(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 2, HeartbeatTTL: 100 * time.Millisecond}, nil)
	a, _ := sim.Host("client-1")
	b, _ := sim.Host("client-2")
	p := New(Options{API: c.Nodes().Meta()})
	run(t, p)
	last := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	p.Observe(map[string]Meta{
		a.NodeID: {Phase: "stuck", RebootRequired: true},
		b.NodeID: {Phase: "idle", LastReboot: last},
	})
	stuck := func() []string {
		nodes, _, err := c.Nodes().List(&api.QueryOptions{Filter: `Meta.rollboot_phase == "stuck"`})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range nodes {
			ids = append(ids, n.ID)
		}
		return ids
	}
	waitFor(t, "the filter to find the stuck node", func() bool { ids := stuck(); return len(ids) == 1 && ids[0] == a.NodeID })
	got, err := c.Nodes().Meta().Read(b.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dynamic[KeyPhase] == nil || *got.Dynamic[KeyPhase] != "idle" || got.Meta[KeyRebootRequired] != "false" ||
		got.Meta[KeyLastReboot] != "2026-05-01T10:00:00Z" {
		t.Errorf("node b's metadata: %v", got.Meta)
	}
	if n := testutil.ToFloat64(p.writes); n != 2 {
		t.Errorf("%v writes, want 2", n)
	}
	// The same again: nothing written. A change: one write, and a key rollboot
	// no longer sets is removed.
	p.Observe(map[string]Meta{a.NodeID: {Phase: "stuck", RebootRequired: true}, b.NodeID: {Phase: "idle", LastReboot: last}})
	p.Observe(map[string]Meta{a.NodeID: {Phase: "idle", LastReboot: last}, b.NodeID: {Phase: "idle", LastReboot: last}})
	waitFor(t, "the stuck node back to idle", func() bool { return len(stuck()) == 0 })
	if n := testutil.ToFloat64(p.writes); n != 3 {
		t.Errorf("%v writes, want 3", n)
	}
	p.Observe(map[string]Meta{a.NodeID: {Phase: "pending", RebootRequired: true}})
	waitFor(t, "the last reboot removed", func() bool {
		got, err := c.Nodes().Meta().Read(a.NodeID, nil)
		_, has := got.Meta[KeyLastReboot]
		return err == nil && got.Meta[KeyPhase] == "pending" && !has
	})
}

// failing is a metadata API that fails every call for the nodes in bad, and
// counts reads.
type failing struct {
	mu    sync.Mutex
	bad   map[string]bool
	calls map[string]int
	meta  map[string]map[string]string
	// onRead, when set, runs at each read, before it answers.
	onRead func(id string)
}

func (f *failing) Read(id string, _ *api.QueryOptions) (*api.NodeMetaResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id]++
	if f.onRead != nil {
		f.onRead(id)
	}
	if f.bad[id] {
		return nil, errors.New("Unknown node " + id)
	}
	return &api.NodeMetaResponse{Meta: f.meta[id]}, nil
}

func (f *failing) Apply(req *api.NodeMetaApplyRequest, _ *api.QueryOptions) (*api.NodeMetaResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bad[req.NodeID] {
		return nil, errors.New("Unknown node " + req.NodeID)
	}
	m := map[string]string{}
	for k, v := range req.Meta {
		if v != nil {
			m[k] = *v
		}
	}
	f.meta[req.NodeID] = m
	return &api.NodeMetaResponse{Meta: m}, nil
}

// A node that fails is counted, logged once and tried again later; the others
// are written meanwhile, and Observe never waits. A host's node whose client
// may be down in its reboot (drained, rebooting, rejoining, by the newest
// metadata wanted, not the one the round started from) is counted as deferred,
// not as an error, and not warned about; an idle host's node that does not
// answer is an error, and warned about.
func TestFailingNode(t *testing.T) {
	f := &failing{bad: map[string]bool{"down": true, "booting": true, "granted": true, "late": true, "gone": true},
		calls: map[string]int{}, meta: map[string]map[string]string{}}
	var logs strings.Builder
	var mu sync.Mutex
	p := New(Options{API: f, Retry: 50 * time.Millisecond, Settle: time.Nanosecond, Log: newLogger(&mu, &logs)})
	want := map[string]Meta{"down": {Phase: "idle"}, "booting": {Phase: "rebooting"}, "granted": {Phase: "drained"},
		"late": {Phase: "draining"}, "gone": {Phase: "draining"}, "up": {Phase: "draining"}}
	// The host late is granted its reboot and goes down while the round that
	// started from it draining comes to it; the node gone is no longer wanted
	// (it is not ready) by then.
	f.onRead = func(id string) {
		now := maps.Clone(want)
		switch id {
		case "late":
			now["late"] = Meta{Phase: "rebooting"}
		case "gone":
			delete(now, "gone")
		default:
			return
		}
		p.Observe(now)
	}
	run(t, p)
	start := time.Now()
	p.Observe(want)
	if time.Since(start) > 100*time.Millisecond {
		t.Error("Observe waited")
	}
	waitFor(t, "the up node written", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.meta["up"][KeyPhase] == "draining"
	})
	waitFor(t, "three tries of the down node", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.calls["down"] >= 3 && f.calls["booting"] >= 3 && f.calls["granted"] >= 3 && f.calls["late"] >= 3 &&
			f.calls["gone"] >= 1
	})
	errs := testutil.ToFloat64(p.errs.WithLabelValues("read"))
	deferred := testutil.ToFloat64(p.deferred.WithLabelValues("read"))
	f.mu.Lock()
	downCalls := f.calls["down"]
	f.mu.Unlock()
	if errs < 3 || errs > float64(downCalls) {
		t.Errorf("%v read errors counted, want those of the idle node down alone (%d tries)", errs, downCalls)
	}
	if deferred < 10 {
		t.Errorf("%v reads deferred, want at least the 10 tries of the nodes that may be down", deferred)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "node metadata not published"); n != 1 || !strings.Contains(logs.String(), "node_id=down") {
		t.Errorf("logged %d times, want once, for the node down:\n%s", n, logs.String())
	}
	f.mu.Lock()
	upCalls := f.calls["up"]
	f.mu.Unlock()
	if upCalls != 1 {
		t.Errorf("the up node was read %d times, want once (it did not change)", upCalls)
	}
}

// A node that did not answer while its host rebooted is written as soon as the
// metadata wanted of it changes (the host is back), not a retry interval later;
// while it stays the same, the node waits for the retry.
func TestRetryWhenWantChanges(t *testing.T) {
	f := &failing{bad: map[string]bool{"n1": true}, calls: map[string]int{}, meta: map[string]map[string]string{}}
	p := New(Options{API: f, Retry: time.Hour})
	run(t, p)
	p.Observe(map[string]Meta{"n1": {Phase: "rebooting", RebootRequired: true}})
	waitFor(t, "the failed read", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.calls["n1"] == 1
	})
	f.mu.Lock()
	f.bad["n1"] = false // the host is back
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "rebooting", RebootRequired: true}}) // unchanged: waits
	time.Sleep(100 * time.Millisecond)
	f.mu.Lock()
	calls := f.calls["n1"]
	f.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the node was tried %d times with its metadata unchanged, want once until the retry", calls)
	}
	p.Observe(map[string]Meta{"n1": {Phase: "rejoining"}})
	waitFor(t, "the node written once it moved on", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.meta["n1"][KeyPhase] == "rejoining"
	})
}

// A node is read once per term: after that, what this term wrote is what it
// says, and a change of the metadata wanted of it is written without reading
// it first. A node whose write failed is written again without a read (the
// write sets every key, whatever the failed one left); one whose read failed
// is read again.
func TestReadOncePerTerm(t *testing.T) {
	f := &failing{bad: map[string]bool{}, calls: map[string]int{}, meta: map[string]map[string]string{
		"n1": {KeyPhase: "idle", KeyRebootRequired: "false"}}}
	p := New(Options{API: f, Retry: 10 * time.Millisecond, Settle: time.Nanosecond})
	run(t, p)
	phase := func(id string) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.meta[id][KeyPhase]
	}
	reads := func(id string) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.calls[id]
	}
	p.Observe(map[string]Meta{"n1": {Phase: "idle"}}) // what the node says: read, not written
	waitFor(t, "the first read", func() bool { return reads("n1") == 1 })
	for _, ph := range []string{"pending", "draining", "drained"} {
		p.Observe(map[string]Meta{"n1": {Phase: ph, RebootRequired: true}})
		waitFor(t, "the node "+ph, func() bool { return phase("n1") == ph })
	}
	if n := reads("n1"); n != 1 {
		t.Errorf("the node was read %d times, want once: what this term wrote is what it says", n)
	}
	if n := testutil.ToFloat64(p.writes); n != 3 {
		t.Errorf("%v writes, want 3", n)
	}
	// The host goes down: the write fails, and the next one is sent without
	// a read.
	f.mu.Lock()
	f.bad["n1"] = true
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "rebooting", RebootRequired: true}})
	waitFor(t, "the failed write", func() bool { return testutil.ToFloat64(p.deferred.WithLabelValues("write")) >= 1 })
	if n := testutil.ToFloat64(p.errs.WithLabelValues("write")); n != 0 {
		t.Errorf("%v write errors counted for a node down in its reboot, want none (it is deferred)", n)
	}
	f.mu.Lock()
	f.bad["n1"] = false
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "rejoining", RebootRequired: true}})
	waitFor(t, "the node rejoining", func() bool { return phase("n1") == "rejoining" })
	if n := reads("n1"); n != 1 {
		t.Errorf("the node was read %d times, want once: a failed write needs no read before the next", n)
	}
	// A failed read, in turn, leaves the node unknown: read before the next
	// write. The written value wanted back is written, not taken as known.
	f.mu.Lock()
	f.bad["n2"] = true
	f.meta["n2"] = map[string]string{KeyPhase: "idle", KeyRebootRequired: "false"}
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "rejoining", RebootRequired: true}, "n2": {Phase: "pending"}})
	waitFor(t, "the failed read of n2", func() bool { return reads("n2") >= 1 })
	f.mu.Lock()
	f.bad["n2"] = false
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "rejoining", RebootRequired: true}, "n2": {Phase: "draining"}})
	waitFor(t, "n2 draining", func() bool { return phase("n2") == "draining" })
	if n := reads("n2"); n < 2 {
		t.Errorf("n2 was read %d times, want again after its failed read", n)
	}
}

// A node whose write failed is written again when the metadata wanted of it
// comes back to what it said before the failure: the failed write may have
// landed, so what it said is not known.
func TestWriteAgainAfterFailedWrite(t *testing.T) {
	f := &failing{bad: map[string]bool{}, calls: map[string]int{}, meta: map[string]map[string]string{
		"n1": {KeyPhase: "idle", KeyRebootRequired: "false"}}}
	p := New(Options{API: f, Retry: 10 * time.Millisecond, Settle: time.Nanosecond})
	run(t, p)
	p.Observe(map[string]Meta{"n1": {Phase: "idle"}})
	waitFor(t, "the first read", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.calls["n1"] == 1
	})
	f.mu.Lock()
	f.bad["n1"] = true
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "pending", RebootRequired: true}})
	waitFor(t, "the failed write", func() bool { return testutil.ToFloat64(p.errs.WithLabelValues("write")) >= 1 })
	f.mu.Lock()
	f.bad["n1"] = false
	f.meta["n1"] = map[string]string{KeyPhase: "pending", KeyRebootRequired: "true"} // it landed after all
	f.mu.Unlock()
	p.Observe(map[string]Meta{"n1": {Phase: "idle"}})
	waitFor(t, "idle written again", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.meta["n1"][KeyPhase] == "idle"
	})
}

// A drained host's phase is written only once it has been drained for Settle:
// one that moves on before (it rebooted at once) never has it written, and
// keeps what it showed before until then; one that stays drained (its hooks
// run, it holds at its go/no-go) has it written once Settle has passed. The
// other nodes are written meanwhile.
func TestDrainedSettles(t *testing.T) {
	f := &failing{bad: map[string]bool{}, calls: map[string]int{}, meta: map[string]map[string]string{}}
	p := New(Options{API: f, Retry: time.Hour, Settle: 300 * time.Millisecond})
	run(t, p)
	phase := func(id string) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.meta[id][KeyPhase]
	}
	p.Observe(map[string]Meta{"quick": {Phase: "draining"}, "slow": {Phase: "draining"}})
	waitFor(t, "both draining", func() bool { return phase("quick") == "draining" && phase("slow") == "draining" })
	start := time.Now()
	p.Observe(map[string]Meta{"quick": {Phase: "drained"}, "slow": {Phase: "drained"}, "other": {Phase: "pending"}})
	waitFor(t, "the other node written", func() bool { return phase("other") == "pending" })
	time.Sleep(100 * time.Millisecond)
	if phase("quick") != "draining" || phase("slow") != "draining" {
		t.Fatalf("drained written before it settled: quick %q, slow %q", phase("quick"), phase("slow"))
	}
	// quick reboots and is back before it settled.
	p.Observe(map[string]Meta{"quick": {Phase: "rejoining"}, "slow": {Phase: "drained"}, "other": {Phase: "pending"}})
	waitFor(t, "quick rejoining", func() bool { return phase("quick") == "rejoining" })
	if time.Since(start) < 300*time.Millisecond && phase("slow") != "draining" {
		t.Fatalf("slow written %q before it settled", phase("slow"))
	}
	waitFor(t, "slow drained once settled", func() bool { return phase("slow") == "drained" })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("slow written drained after %s, before it settled", d)
	}
	if n := testutil.ToFloat64(p.writes); n != 5 {
		t.Errorf("%v writes, want 5 (two draining, pending, rejoining, drained once settled: never quick's drained)", n)
	}
}

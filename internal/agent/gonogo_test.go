package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// countingRebooter records reboots and succeeds (the test plays the reboot).
type countingRebooter struct {
	mu    sync.Mutex
	calls int
	ch    chan struct{}
}

func (c *countingRebooter) Reboot(context.Context) error {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
	return nil
}

func (c *countingRebooter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

type agentEnv struct {
	sim    *nomadsim.Sim
	h      nomadsim.Host
	client *api.Client
	st     *store.Store
	bootID string
}

func newAgentEnv(t *testing.T, cfg nomadsim.Config) *agentEnv {
	t.Helper()
	sim, err := nomadsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	h := sim.Hosts()[len(sim.Hosts())-1]
	client, err := api.NewClient(&api.Config{Address: "http://" + h.Addr, SecretID: tokenOf(sim)})
	if err != nil {
		t.Fatal(err)
	}
	bootID, err := ReadBootID(filepath.Join(h.Dir, "boot_id"))
	if err != nil {
		t.Fatal(err)
	}
	return &agentEnv{sim: sim, h: h, client: client, st: store.New(client.Variables(), "rollboot", ""), bootID: bootID}
}

func tokenOf(sim *nomadsim.Sim) string {
	if sim.ACLEnabled() {
		return sim.ManagementToken()
	}
	return ""
}

func (e *agentEnv) options(reb Rebooter, log *syncbuf.Buffer) Options {
	o := Options{Host: e.h.Name, Store: e.st, Local: e.client.Agent(), NodeList: e.client.Nodes(), BootIDFile: filepath.Join(e.h.Dir, "boot_id"),
		Detectors: []Detector{FileDetector{Path: filepath.Join(e.h.Dir, "reboot-required")}},
		Rebooter:  reb, RetryAfter: 100 * time.Millisecond, PollEvery: 20 * time.Millisecond,
		Nodes: e.client.Nodes(), RecheckEvery: 50 * time.Millisecond}
	if log != nil {
		o.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return o
}

// drainFor drains the host's node as the coordinator does for grant and waits
// for the drain to complete.
func (e *agentEnv) drainFor(t *testing.T, grant string) {
	t.Helper()
	_, err := e.client.Nodes().UpdateDrainOpts(e.h.NodeID, &api.DrainOptions{
		DrainSpec: &api.DrainSpec{IgnoreSystemJobs: true}, Meta: map[string]string{phase.DrainMetaGrant: grant}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitNode(t, "the drain to complete", func(n *api.Node) bool {
		return n.DrainStrategy == nil && n.LastDrain != nil && n.LastDrain.Status == api.DrainStatusComplete
	})
}

func (e *agentEnv) waitNode(t *testing.T, what string, cond func(n *api.Node) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := e.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		n, ok := v.Node(e.h.NodeID)
		return ok && cond(n)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitRecord(t *testing.T, st *store.Store, host, what string, cond func(r store.HostRecord) bool) store.HostRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var idx uint64
	for {
		rec, err := st.Host(context.Background(), host)
		if err == nil && cond(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: record %+v, err %v", what, rec, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, n, _ := st.Hosts(ctx, idx, 200*time.Millisecond)
		cancel()
		idx = n
	}
}

// The final go/no-go believes Nomad, not the plan alone: an operator who marks
// the drained node eligible again holds the reboot (the reason is published).
// Marked ineligible again, it still holds: Nomad may have placed work on the
// node meanwhile, and without reading allocations the agent cannot tell that it
// did not. A new drain for the grant moves any such work off, and the reboot
// goes ahead.
func TestFinalCheckHoldsAnEligibleNode(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	a := New(e.options(reb, nil))
	e.drainFor(t, "g1")
	// The operator's mistake, between the drain and the reboot.
	if _, err := e.client.Nodes().ToggleEligibility(e.h.NodeID, true, nil); err != nil {
		t.Fatal(err)
	}
	stop, _ := run(t, a)
	defer stop()
	if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", BootIDAtGrant: e.bootID, NodeID: e.h.NodeID}); err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the hold to be published", func(r store.HostRecord) bool { return r.HoldReason != "" })
	if !strings.Contains(rec.HoldReason, "eligible again") || rec.RebootingGrant != "g1" {
		t.Errorf("hold %q for grant %q", rec.HoldReason, rec.RebootingGrant)
	}
	if _, err := e.client.Nodes().ToggleEligibility(e.h.NodeID, false, nil); err != nil {
		t.Fatal(err)
	}
	rec = waitRecord(t, e.st, e.h.Name, "the hold on the eligibility change", func(r store.HostRecord) bool {
		return strings.Contains(r.HoldReason, "eligibility changed after its drain completed")
	})
	if !strings.Contains(rec.HoldReason, "Node marked as eligible for scheduling") {
		t.Errorf("hold %q does not name the event", rec.HoldReason)
	}
	select {
	case <-reb.ch:
		t.Fatal("rebooted a node that was eligible after its drain")
	case <-time.After(300 * time.Millisecond): // six rechecks
	}
	e.drainFor(t, "g1")
	select {
	case <-reb.ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no reboot after the node was drained again")
	}
}

// Nomad keeps a node's 10 newest events: once the drain's completion is no
// longer among them, the agent cannot tell whether the node stayed ineligible
// since, and holds until the node is drained again.
func TestFinalCheckHoldsWhenTheDrainEventRolledOff(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	e.drainFor(t, "g1")
	for i := range maxNodeEvents {
		if err := e.sim.EmitNodeEvent(e.h.Name, "Driver", fmt.Sprintf("Driver docker is unhealthy (%d)", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	stop, _ := run(t, New(e.options(reb, nil)))
	defer stop()
	if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", BootIDAtGrant: e.bootID, NodeID: e.h.NodeID}); err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the hold to be published", func(r store.HostRecord) bool { return r.HoldReason != "" })
	if !strings.Contains(rec.HoldReason, "cannot tell whether the node stayed ineligible") {
		t.Errorf("hold %q", rec.HoldReason)
	}
	select {
	case <-reb.ch:
		t.Fatal("rebooted without knowing that the node stayed ineligible")
	case <-time.After(300 * time.Millisecond):
	}
	e.drainFor(t, "g1")
	select {
	case <-reb.ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no reboot after the node was drained again")
	}
}

// fakeNode is a NodeAPI that reports one node.
type fakeNode struct{ n *api.Node }

func (f fakeNode) Info(string, *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	return f.n, &api.QueryMeta{}, nil
}

// The node gate: a node drained for the grant passes when its events show it
// stayed ineligible since the drain completed; an eligibility event after the
// completion, or a completion no longer among the events, holds it. After a
// forced drain only the drain is checked, as before.
func TestNodeGate(t *testing.T) {
	ev := func(msg string) *api.NodeEvent { return &api.NodeEvent{Message: msg, Subsystem: "Cluster"} }
	drained := []*api.NodeEvent{ev("Node registered"), ev("Node drain strategy set"), ev("Node drain complete")}
	tests := []struct {
		name   string
		events []*api.NodeEvent
		forced bool
		want   string // "" = may reboot
	}{
		{"stayed ineligible", drained, false, ""},
		{"driver events after the drain", append(slices.Clone(drained), ev("Driver docker is healthy")), false, ""},
		{"marked eligible after the drain", append(slices.Clone(drained), ev("Node marked as eligible for scheduling"),
			ev("Node marked as ineligible for scheduling")), false, `eligibility changed after its drain completed ("Node marked as eligible`},
		{"marked ineligible after plan rejections", append(slices.Clone(drained), ev("Node marked as ineligible for scheduling due to multiple plan rejections, refer to ...")),
			false, "eligibility changed after its drain completed"},
		{"completion rolled off", []*api.NodeEvent{ev("Driver docker is healthy")}, false, "cannot tell"},
		{"forced, eligible in between", append(slices.Clone(drained), ev("Node marked as eligible for scheduling")), true, ""},
		{"forced, completion rolled off", nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &api.Node{SchedulingEligibility: api.NodeSchedulingIneligible, Events: tc.events,
				LastDrain: &api.DrainMetadata{Status: api.DrainStatusComplete, Meta: map[string]string{phase.DrainMetaGrant: "g1"}}}
			a := New(Options{Host: "h1", Nodes: fakeNode{n}})
			a.rec.NodeID = "node-1"
			got := a.nodeGate(context.Background(), store.Plan{GrantID: "g1", Forced: tc.forced})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("nodeGate = %q, want %q", got, tc.want)
			}
		})
	}
}

// Each way the node can disagree with the plan holds the reboot.
func TestNodeDrainedFor(t *testing.T) {
	done := &api.DrainMetadata{Status: api.DrainStatusComplete, Meta: map[string]string{phase.DrainMetaGrant: "g1"}}
	tests := []struct {
		name string
		node api.Node
		want string // "" = may reboot
	}{
		{"drained for this grant", api.Node{SchedulingEligibility: "ineligible", LastDrain: done}, ""},
		{"eligible again", api.Node{SchedulingEligibility: "eligible", LastDrain: done}, "eligible again"},
		{"drain under way", api.Node{SchedulingEligibility: "ineligible", DrainStrategy: &api.DrainStrategy{}, LastDrain: done}, "being drained"},
		{"never drained", api.Node{SchedulingEligibility: "ineligible"}, "no completed drain"},
		{"someone else's drain", api.Node{SchedulingEligibility: "ineligible",
			LastDrain: &api.DrainMetadata{Status: api.DrainStatusComplete}}, "not rollboot's"},
		{"another grant's drain", api.Node{SchedulingEligibility: "ineligible",
			LastDrain: &api.DrainMetadata{Status: api.DrainStatusComplete, Meta: map[string]string{phase.DrainMetaGrant: "g0"}}}, "not rollboot's"},
		{"canceled", api.Node{SchedulingEligibility: "ineligible",
			LastDrain: &api.DrainMetadata{Status: api.DrainStatusCanceled, Meta: map[string]string{phase.DrainMetaGrant: "g1"}}}, "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeDrainedFor(&tc.node, "g1")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("nodeDrainedFor = %q, want %q", got, tc.want)
			}
		})
	}
}

// A failing pre-reboot hook is published (step, exit status, first line of
// stderr) and the same grant is never tried again; a new grant is.
func TestFailedHookIsPublishedOnce(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	o := e.options(reb, nil)
	flag := filepath.Join(t.TempDir(), "fixed")
	o.PreHooks = [][]string{{"sh", "-c", `test -e ` + flag + ` || { echo "disk full" >&2; echo second line >&2; exit 3; }`}}
	var failed sync.WaitGroup
	failed.Add(1)
	o.RebootFailed = sync.OnceFunc(failed.Done)
	stop, _ := run(t, New(o))
	defer stop()
	e.drainFor(t, "g1")
	idx, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", BootIDAtGrant: e.bootID, NodeID: e.h.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the failure", func(r store.HostRecord) bool { return r.Failure != nil })
	f := rec.Failure
	if f.Grant != "g1" || f.Step != store.StepPreHook || f.ExitStatus != 3 || !strings.HasSuffix(f.Message, ": disk full") {
		t.Errorf("failure = %+v", f)
	}
	failed.Wait()
	// Many retry periods later: no second attempt of the same grant.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reb.ch:
		t.Fatal("a failed grant was tried again")
	case <-time.After(500 * time.Millisecond):
	}
	// The coordinator's retry: a new grant.
	e.drainFor(t, "g2")
	if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g2",
		BootIDAtGrant: e.bootID, NodeID: e.h.NodeID, ModifyIndex: idx}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reb.ch:
	case <-time.After(20 * time.Second):
		t.Fatal("the new grant was not carried out")
	}
}

// A Nomad without a leader (500) at the agent's first read of its record, then a
// burst of 429s, do not stop the agent: it keeps trying and publishes its record
// once the servers answer.
func TestTransientErrorsDoNotStopTheAgent(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	if err := e.sim.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/var", ErrorRate: 1, Status: 429, Count: 3}); err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	stop, _ := run(t, New(e.options(&countingRebooter{}, log)))
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), `msg="failed; retrying"`) || !strings.Contains(log.String(), `op="read the host record"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no retry logged:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a log: no condition to block on
	}
	if err := e.sim.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, e.st, e.h.Name, "the record", func(r store.HostRecord) bool { return r.BootID == e.bootID })
}

// An unknown token (403) is reported loudly, without the token, and the agent
// keeps running rather than exiting.
func TestDeniedTokenIsReportedAndRetried(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1, ACL: true})
	const secret = "00000000-dead-beef-0000-000000000000"
	bad, err := api.NewClient(&api.Config{Address: "http://" + e.h.Addr, SecretID: secret})
	if err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	o := e.options(&countingRebooter{}, log)
	o.Local, o.NodeList, o.Store = bad.Agent(), bad.Nodes(), store.New(bad.Variables(), "rollboot", "")
	stop, _ := run(t, New(o))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), "permission denied") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a log: no condition to block on
	}
	stop() // Run returned nil: the agent had not exited by itself
	if !strings.Contains(log.String(), "level=ERROR") || strings.Contains(log.String(), secret) {
		t.Errorf("log:\n%s", log.String())
	}
}

package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/workload"
)

// failingVars is memVars whose writes to paths starting with failPrefix fail.
type failingVars struct {
	*memVars
	failPrefix string
}

func (f *failingVars) put(v *api.Variable, create bool) (*api.Variable, *api.WriteMeta, error) {
	if f.failPrefix != "" && strings.HasPrefix(v.Path, f.failPrefix) {
		return nil, nil, errInjected
	}
	return f.memVars.put(v, create)
}

func (f *failingVars) CheckedCreate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return f.put(v, true)
}

func (f *failingVars) CheckedUpdate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return f.put(v, false)
}

// handOffPass stores, in the default group (one host out at once), h00
// rejoining and back (its cycle closes in the next pass) and h01 pending for
// the slot, then runs one pass with the writes to failPrefix failing. It
// returns the plans after the pass, the node writes, and the pass's error.
func handOffPass(t *testing.T, failPrefix string) (map[string]store.Plan, []string, error) {
	t.Helper()
	ctx := context.Background()
	log := &callLog{}
	vars := &failingVars{memVars: newMemVars(log)}
	st := store.New(vars, "rollboot", "")
	stubs := putHosts(t, st, 2, backAndNextRecords(nil))
	putBackAndNext(t, st, store.PhaseRejoining)
	vars.failPrefix = failPrefix
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	passErr := c.ReconcileOnce(ctx)
	vars.failPrefix = ""
	byHost, nodeWrites := plansAndNodeCalls(t, st, log)
	return byHost, nodeWrites, passErr
}

// backAndNextRecords sets the records of putBackAndNext's hosts: h00's agent
// back with a new boot ID (then changed by rec, when given), h01 needing a
// reboot.
func backAndNextRecords(rec func(*store.HostRecord)) func(int, *store.HostRecord) {
	return func(i int, r *store.HostRecord) {
		r.BootID = "b2"
		if i == 1 {
			r.BootID, r.RebootRequired, r.RequestedAt = "b1", true, t0.Add(-time.Hour)
		} else if rec != nil {
			rec(r)
		}
	}
}

// putBackAndNext stores, in the default group, h00 in phase (rejoining from a
// reboot, or before the rejoin) and h01 pending, next in line for the slot.
func putBackAndNext(t *testing.T, st *store.Store, phase string) {
	t.Helper()
	back := plan(phase, func(p *store.Plan) {
		p.Host, p.NodeID, p.Group = "h00", "n-h00", "default"
		p.Timeline[store.PhaseDraining] = t0.Add(-50 * time.Minute)
	})
	next := store.Plan{Host: "h01", Phase: store.PhasePending, Group: "default", PhaseSince: t0.Add(-time.Hour),
		RequestedAt: t0.Add(-time.Hour), Reason: "kernel", Timeline: map[string]time.Time{store.PhasePending: t0.Add(-time.Hour)}}
	for _, p := range []store.Plan{back, next} {
		if _, err := st.PutPlan(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// plansAndNodeCalls returns the plans st holds, by host, and the calls in log
// that are not variable writes: those to Nomad's nodes API, in order.
func plansAndNodeCalls(t *testing.T, st *store.Store, log *callLog) (map[string]store.Plan, []string) {
	t.Helper()
	plans, err := st.Plans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string]store.Plan{}
	for _, p := range plans {
		byHost[p.Host] = p
	}
	var calls []string
	for _, call := range log.get() {
		if !strings.HasPrefix(call, "put ") && !strings.HasPrefix(call, "delete ") {
			calls = append(calls, call)
		}
	}
	return byHost, calls
}

// The history beyond coordinator.history_size is pruned once the pass's
// writes are done: after the close's plan and the hand-out's drain, not
// between the close's history record and its plan.
func TestHistoryPrunedAfterTheHandOut(t *testing.T) {
	ctx := context.Background()
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 2, backAndNextRecords(nil))
	putBackAndNext(t, st, store.PhaseRejoining)
	old := store.HistoryRecord{Host: "h09", GrantID: "g0", Outcome: "rebooted", Finished: t0.Add(-48 * time.Hour)}
	if err := st.AppendHistory(ctx, old, 0); err != nil {
		t.Fatal(err)
	}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing, HistorySize: 1},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	calls := log.get()
	at := func(call string) int {
		t.Helper()
		i := slices.Index(calls, call)
		if i < 0 {
			t.Fatalf("no %q in %q", call, calls)
		}
		return i
	}
	if del := at("delete history"); del < at("put plan/h00") || del < at("drain n-h01") {
		t.Errorf("the history pruned before the pass's writes were done: %q", calls)
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].Host != "h00" {
		t.Errorf("history after the pass %+v, want h00's cycle only", h)
	}
}

// A slot freed by a cycle that closes is handed to the next host in line in
// the same pass: its drain starts without waiting for another pass.
func TestFreedSlotIsHandedOutInTheSamePass(t *testing.T) {
	plans, nodeWrites, err := handOffPass(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := plans["h00"].Phase; got != store.PhaseIdle {
		t.Errorf("h00 is %s after the pass, want idle (its cycle closed)", got)
	}
	if got := plans["h01"].Phase; got != store.PhaseDraining {
		t.Errorf("h01 is %s after the pass, want draining (the slot h00 freed)", got)
	}
	if !slices.Equal(nodeWrites, []string{"drain n-h01"}) {
		t.Errorf("node writes %q, want the drain of h01's node", nodeWrites)
	}
}

// A close whose write failed does not free its slot: the next host keeps
// waiting, and no drain starts.
func TestFailedCloseKeepsItsSlot(t *testing.T) {
	for _, failing := range []string{"rollboot/history/", "rollboot/plan/h00"} {
		t.Run(failing, func(t *testing.T) {
			plans, nodeWrites, err := handOffPass(t, failing)
			if err == nil {
				t.Error("the pass reported no error")
			}
			if got := plans["h00"].Phase; got != store.PhaseRejoining {
				t.Errorf("h00 is %s after the pass, want still rejoining", got)
			}
			if got := plans["h01"].Phase; got != store.PhasePending {
				t.Errorf("h01 is %s after the pass, want still pending", got)
			}
			if len(nodeWrites) != 0 {
				t.Errorf("node writes %q, want none", nodeWrites)
			}
		})
	}
}

// A host whose need the pass sees while its group has room is stored pending
// and granted in that same pass: its drain starts without waiting for another.
func TestNewNeedIsGrantedInTheSamePass(t *testing.T) {
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 2, func(i int, r *store.HostRecord) {
		if i == 0 {
			r.RebootRequired, r.RequestedAt, r.Reason = true, t0.Add(-time.Minute), "kernel"
		}
	})
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	plans := passThenPlans(t, c, st)
	for _, p := range plans {
		if p.Host == "h00" && (p.Phase != store.PhaseDraining || p.Timeline[store.PhasePending].IsZero()) {
			t.Errorf("h00 is %s (timeline %v) after one pass, want draining, pending first", p.Phase, p.Timeline)
		}
	}
	var nodeWrites, planPuts []string
	for _, call := range log.get() {
		if !strings.HasPrefix(call, "put ") && !strings.HasPrefix(call, "delete ") {
			nodeWrites = append(nodeWrites, call)
		}
		if call == "put plan/h00" {
			planPuts = append(planPuts, call)
		}
	}
	if !slices.Equal(nodeWrites, []string{"drain n-h00"}) {
		t.Errorf("node writes %q, want the drain of h00's node", nodeWrites)
	}
	// Its grant is its first write: no pending plan stored before it.
	if len(planPuts) != 1 {
		t.Errorf("h00's plan stored %d times in the pass, want once (calls %q)", len(planPuts), log.get())
	}
}

// A host made pending first in its group's line whose group has no slot free
// is not granted, and its pending plan is stored all the same.
func TestHeadNotGrantedIsStoredPending(t *testing.T) {
	ctx := context.Background()
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 2, func(i int, r *store.HostRecord) {
		r.BootID = "b1"
		if i == 0 {
			r.RebootRequired, r.RequestedAt, r.Reason = true, t0.Add(-time.Minute), "kernel"
		}
	})
	// h01 holds the default group's one slot, rebooting.
	busy := plan(store.PhaseRebooting, func(p *store.Plan) { p.Host, p.NodeID, p.Group = "h01", "n-h01", "default" })
	if _, err := st.PutPlan(ctx, busy); err != nil {
		t.Fatal(err)
	}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	plans := passThenPlans(t, c, st)
	if p := plans["h00"]; p.Phase != store.PhasePending || p.Timeline[store.PhasePending] != t0 {
		t.Errorf("h00 is %s (timeline %v) after the pass, want pending since %s", p.Phase, p.Timeline, t0)
	}
	for _, call := range log.get() {
		if call == "drain n-h00" {
			t.Errorf("h00's node drained with the slot taken (calls %q)", log.get())
		}
	}
}

// A head whose grant could not be stored is neither drained nor stored
// pending in that pass: its plan is as it was, and the next pass grants it.
func TestHeadWhoseGrantFailedIsDecidedAgain(t *testing.T) {
	ctx := context.Background()
	log := &callLog{}
	vars := &failingVars{memVars: newMemVars(log)}
	st := store.New(vars, "rollboot", "")
	stubs := putHosts(t, st, 1, func(_ int, r *store.HostRecord) {
		r.RebootRequired, r.RequestedAt, r.Reason = true, t0.Add(-time.Minute), "kernel"
	})
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	vars.failPrefix = "rollboot/plan/h00"
	log.reset(0)
	if err := c.ReconcileOnce(ctx); err == nil {
		t.Error("the pass reported no error")
	}
	vars.failPrefix = ""
	if calls := log.get(); len(calls) != 0 {
		t.Errorf("calls %q, want none (the grant failed before its drain)", calls)
	}
	plans := passThenPlans(t, c, st)
	if p := plans["h00"]; p.Phase != store.PhaseDraining {
		t.Errorf("h00 is %s after the next pass, want draining", p.Phase)
	}
}

// When many hosts need a reboot at once, the pass grants the hosts first in
// line and only then stores the other pending plans: the first drain waits
// for no pending write.
func TestHeadsOfTheQueueGrantedBeforeTheRestPending(t *testing.T) {
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	const hosts = 3 * PlanWriteParallelism
	stubs := putHosts(t, st, hosts, func(i int, r *store.HostRecord) {
		// The last hosts by name asked first: admission serves by time.
		r.RebootRequired, r.RequestedAt, r.Reason = true, t0.Add(-time.Hour+time.Duration(hosts-i)*time.Second), "kernel"
	})
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing, DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2}},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	plans := passThenPlans(t, c, st)
	var draining []string
	pending := 0
	for _, p := range plans {
		switch p.Phase {
		case store.PhaseDraining:
			draining = append(draining, p.Host)
		case store.PhasePending:
			pending++
		}
	}
	slices.Sort(draining)
	last := fmt.Sprintf("h%02d", hosts-1)
	beforeLast := fmt.Sprintf("h%02d", hosts-2)
	if !slices.Equal(draining, []string{beforeLast, last}) || pending != hosts-2 {
		t.Fatalf("after one pass %v draining and %d pending; want %s and %s (asked first) draining, the %d others pending",
			draining, pending, beforeLast, last, hosts-2)
	}
	planPuts := 0
	for _, call := range log.get() {
		if strings.HasPrefix(call, "drain ") {
			break
		}
		if strings.HasPrefix(call, "put plan/") {
			planPuts++
		}
	}
	// Their two grants at most, then the drains: no pending plan first.
	if planPuts > 2 {
		t.Errorf("%d plans stored before the first drain, want at most 2 (calls %q)", planPuts, log.get())
	}
}

// passThenPlans runs one pass of c and returns the plans stored after it.
func passThenPlans(t *testing.T, c *Coordinator, st *store.Store) map[string]store.Plan {
	t.Helper()
	if err := c.ReconcileOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	plans, err := st.Plans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return plans
}

// aheadVars is memVars whose write of one path waits, up to a second, for
// the read of one node's allocations to begin (readBegun).
type aheadVars struct {
	*memVars
	path      string
	readBegun chan struct{}
	waited    atomic.Bool // the write saw the read begin first
}

func (v *aheadVars) put(p *api.Variable, create bool) (*api.Variable, *api.WriteMeta, error) {
	if p.Path == v.path {
		select {
		case <-v.readBegun:
			v.waited.Store(true)
		case <-time.After(time.Second):
		}
	}
	return v.memVars.put(p, create)
}

func (v *aheadVars) CheckedCreate(p *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return v.put(p, true)
}

func (v *aheadVars) CheckedUpdate(p *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return v.put(p, false)
}

// aheadNodes is recNodes that counts the reads of each node's allocations and
// tells when the read of one node's begins.
type aheadNodes struct {
	recNodes
	node  string
	begun chan struct{}
	once  sync.Once
	mu    sync.Mutex
	reads map[string]int
}

func (n *aheadNodes) Allocations(id string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	n.reads[id]++
	n.mu.Unlock()
	if id == n.node {
		n.once.Do(func() { close(n.begun) })
	}
	return n.recNodes.Allocations(id, q)
}

// putTwoBackTwoNext stores, in the default group, h00 and h02 rejoining and
// back (their cycles close in the next pass) and h01 and h03 pending, h01
// first in line; it returns the hosts' node stubs.
func putTwoBackTwoNext(t *testing.T, st *store.Store) []*api.NodeListStub {
	t.Helper()
	stubs := putHosts(t, st, 4, func(i int, r *store.HostRecord) {
		r.BootID = "b2"
		if i%2 == 1 {
			r.BootID, r.RebootRequired, r.RequestedAt = "b1", true, t0.Add(-time.Hour)
		}
	})
	for i := range 4 {
		name := fmt.Sprintf("h%02d", i)
		p := plan(store.PhaseRejoining, func(p *store.Plan) {
			p.Host, p.NodeID, p.Group = name, "n-"+name, "default"
			p.Timeline[store.PhaseDraining] = t0.Add(-50 * time.Minute)
		})
		if i%2 == 1 {
			p = store.Plan{Host: name, Phase: store.PhasePending, Group: "default", PhaseSince: t0.Add(-time.Hour),
				RequestedAt: t0.Add(-time.Hour + time.Duration(i)*time.Minute), Reason: "kernel",
				Timeline: map[string]time.Time{store.PhasePending: t0.Add(-time.Hour)}}
		}
		if _, err := st.PutPlan(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	return stubs
}

// The allocations of the node of the host next in line are read as soon as
// the close that frees its slot is stored, beside the pass's other writes,
// and the hand-out takes that read. Two cycles close in a group of two slots
// (h00, h02), two hosts wait (h01, h03); h02's plan write waits here until the
// read of h01's node has begun, which h00's close starts: it would wait in
// vain if the reads came after all the writes. Each node is read once.
func TestNextInLineReadBesideTheCloses(t *testing.T) {
	begun := make(chan struct{})
	var nodes *aheadNodes
	vars, _ := twoBackTwoNextPass(t, begun, func(rec recNodes) NodesAPI {
		nodes = &aheadNodes{recNodes: rec, node: "n-h01", begun: begun, reads: map[string]int{}}
		return nodes
	})
	if !vars.waited.Load() {
		t.Error("h02's close was stored before h01's node was read: the read did not start beside the writes")
	}
	for _, n := range []string{"n-h01", "n-h03"} {
		if got := nodes.reads[n]; got != 1 {
			t.Errorf("the allocations of %s read %d times in the pass, want once", n, got)
		}
	}
}

// twoBackTwoNextPass runs a pass of a coordinator whose default group has two
// slots, over putTwoBackTwoNext's hosts, on the nodes nodesOf makes of the
// recording nodes; h02's plan write waits for begun (a second at most). It
// checks that both waiting hosts were granted and their drains started in
// the pass, and returns the variables and the node writes.
func twoBackTwoNextPass(t *testing.T, begun chan struct{}, nodesOf func(recNodes) NodesAPI) (*aheadVars, []string) {
	t.Helper()
	log := &callLog{}
	vars := &aheadVars{memVars: newMemVars(log), readBegun: begun}
	st := store.New(vars, "rollboot", "")
	stubs := putTwoBackTwoNext(t, st)
	vars.path = "rollboot/plan/h02"
	c := New(Options{
		Deps:    Deps{Nodes: nodesOf(recNodes{log: log, nodes: stubs}), Store: st},
		Rules:   rules.Rules{Timing: timing, DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2}},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	if err := c.ReconcileOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	plans, nodeWrites := plansAndNodeCalls(t, st, log)
	for _, h := range []string{"h01", "h03"} {
		if got := plans[h].Phase; got != store.PhaseDraining || !slices.Contains(nodeWrites, "drain n-"+h) {
			t.Fatalf("%s is %s with node writes %q, want draining, its node's drain started in the pass", h, got, nodeWrites)
		}
	}
	return vars, nodeWrites
}

// drainBegunNodes is recNodes that tells when the drain of one node begins.
type drainBegunNodes struct {
	recNodes
	node  string
	begun chan struct{}
	once  sync.Once
}

func (n *drainBegunNodes) UpdateDrainOpts(id string, opts *api.DrainOptions, q *api.WriteOptions) (*api.NodeDrainUpdateResponse, error) {
	if id == n.node && opts.DrainSpec != nil {
		n.once.Do(func() { close(n.begun) })
	}
	return n.recNodes.UpdateDrainOpts(id, opts, q)
}

// A slot freed while the pass's other writes go on is handed out before they
// end. Two cycles close in a group of two slots (h00, h02), two hosts wait
// (h01, h03); h02's plan write waits here until the drain of h01's node has
// begun, which the slot h00's close frees starts: it would wait in vain if
// the hand-out came after all the writes. Both waiting hosts are granted in
// the pass, h01 first (it asked first).
func TestSlotHandedOutBeforeThePassWritesEnd(t *testing.T) {
	begun := make(chan struct{})
	vars, nodeWrites := twoBackTwoNextPass(t, begun, func(rec recNodes) NodesAPI {
		return &drainBegunNodes{recNodes: rec, node: "n-h01", begun: begun}
	})
	if !vars.waited.Load() {
		t.Errorf("h02's close was stored before h01's drain began: the slot h00 freed waited for the pass's writes (node writes %q)", nodeWrites)
	}
	if i, j := slices.Index(nodeWrites, "drain n-h01"), slices.Index(nodeWrites, "drain n-h03"); i > j {
		t.Errorf("h03 drained before h01, which asked first: %q", nodeWrites)
	}
}

// evalsBegun is fakeWorkloads that tells when a list of the evaluations
// begins.
type evalsBegun struct {
	*fakeWorkloads
	begun chan struct{}
	once  sync.Once
}

func (f *evalsBegun) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	f.once.Do(func() { close(f.begun) })
	return f.fakeWorkloads.ListEvaluations(q)
}

// The workload blockers are read for a group's hosts only while it has a slot
// free: the pass that closes h00's cycle starts with the group full, so its
// admission lists no blocked evaluation for h01; the list for h01 is read
// beside the close's write (h00's plan write waits here until it has begun),
// and the hand-out decides on it. With an evaluation blocked in its pool, h01
// stays pending, held, and its node is not drained; with none, it is granted
// in the same pass, after one list.
func TestHandOutReadsTheBlockersOfTheFreedGroup(t *testing.T) {
	for _, blocked := range []bool{true, false} {
		t.Run(fmt.Sprint("blocked ", blocked), func(t *testing.T) {
			ctx := context.Background()
			log := &callLog{}
			begun := make(chan struct{})
			vars := &aheadVars{memVars: newMemVars(log), readBegun: begun}
			st := store.New(vars, "rollboot", "")
			stubs := putHosts(t, st, 2, backAndNextRecords(nil))
			for _, n := range stubs {
				n.NodePool = "default"
			}
			putBackAndNext(t, st, store.PhaseRejoining)
			vars.path = "rollboot/plan/h00"
			f := &fakeWorkloads{jobs: []*api.Job{testJob("default", "etl", "default", nil)}}
			if blocked {
				f.evals = []*api.Evaluation{{ID: "e1", Namespace: "default", JobID: "etl", Status: "blocked"}}
			}
			c := New(Options{
				Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st, WorkloadsAPI: &evalsBegun{fakeWorkloads: f, begun: begun}},
				Rules:   rules.Rules{Timing: timing, Workloads: workload.Default()},
				Runtime: Runtime{Now: func() time.Time { return t0 }},
			})
			log.reset(0)
			if err := c.ReconcileOnce(ctx); err != nil {
				t.Fatal(err)
			}
			plans, nodeWrites := plansAndNodeCalls(t, st, log)
			if got := plans["h00"].Phase; got != store.PhaseIdle {
				t.Fatalf("h00 is %s after the pass, want idle (its cycle closed)", got)
			}
			var lists int
			for _, call := range f.calls {
				if strings.HasPrefix(call, "evals ") {
					lists++
				}
			}
			if lists != 1 {
				t.Errorf("blocked evaluations listed %d times (requests %q), want once, for the hand-out", lists, f.calls)
			}
			if !vars.waited.Load() {
				t.Error("h00's close was stored before the evaluations were listed: the list did not start beside the writes")
			}
			switch {
			case blocked && (plans["h01"].Phase != store.PhasePending || slices.Contains(nodeWrites, "drain n-h01")):
				t.Errorf("h01 is %s, node writes %q: want it pending and its node not drained (an evaluation is blocked in its pool)", plans["h01"].Phase, nodeWrites)
			case !blocked && plans["h01"].Phase != store.PhaseDraining:
				t.Errorf("h01 is %s, want draining (nothing blocked)", plans["h01"].Phase)
			}
			if !blocked {
				return
			}
			// The next pass, its group with a slot free, says why it waits.
			if err := c.ReconcileOnce(ctx); err != nil {
				t.Fatal(err)
			}
			plans, _ = plansAndNodeCalls(t, st, log)
			if p := plans["h01"]; p.Phase != store.PhasePending || !strings.Contains(p.Waiting, "evaluation is blocked") {
				t.Errorf("h01 is %s, waiting for %q; want pending, held by the blocked evaluation", p.Phase, p.Waiting)
			}
		})
	}
}

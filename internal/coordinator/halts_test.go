package coordinator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// failureRun is what failurePass found: the halt state (and why it could not
// be read back), the plans and the node calls after the passes, the first
// pass's error, and the coordinator.
type failureRun struct {
	halts     policy.HaltState
	haltsErr  error
	plans     map[string]store.Plan
	nodeCalls []string
	passErr   error
	c         *Coordinator
}

// failurePass stores h00 rebooting, its agent reporting that the reboot
// failed (a failed cycle), and h01 pending next in line, under a rollout
// failure budget of one failure; then runs two passes with the writes to
// failPrefix failing, after prepare.
func failurePass(t *testing.T, failPrefix string, prepare func(*failingVars)) failureRun {
	t.Helper()
	ctx := context.Background()
	log := &callLog{}
	vars := &failingVars{memVars: newMemVars(log)}
	st := store.New(vars, "rollboot", "")
	stubs := putHosts(t, st, 2, backAndNextRecords(func(r *store.HostRecord) {
		r.BootID, r.RebootingGrant, r.RebootRequired, r.RequestedAt = "b1", "g1", true, t0.Add(-2*time.Hour)
		r.Failure = &store.RebootFailure{Grant: "g1", Step: store.StepReboot, ExitStatus: 1, Message: "reboot: denied", At: t0}
	}))
	putBackAndNext(t, st, store.PhaseRebooting)
	if prepare != nil {
		prepare(vars)
	}
	vars.failPrefix = failPrefix
	budget := policy.FailureBudget{MaxFailures: 1, Window: time.Hour, Count: policy.FailureKinds}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing, FailureBudgets: policy.FailureBudgets{Rollout: budget}},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	log.reset(0)
	r := failureRun{c: c}
	r.passErr = c.ReconcileOnce(ctx)
	_ = c.ReconcileOnce(ctx) // the next pass: stores why h01 waits
	vars.failPrefix = ""
	r.plans, r.nodeCalls = plansAndNodeCalls(t, st, log)
	r.halts, _, r.haltsErr = st.Halts(ctx)
	return r
}

// A failed cycle is stored with the halt it causes before the decision that
// ends the cycle is carried out, so the slot it frees is not handed out: the
// next host waits with the halt as its reason.
func TestFailureHaltsBeforeTheSlotIsHandedOut(t *testing.T) {
	r := failurePass(t, "", nil)
	hs, plans, nodeCalls, c := r.halts, r.plans, r.nodeCalls, r.c
	if r.haltsErr != nil || r.passErr != nil {
		t.Fatal(r.haltsErr, r.passErr)
	}
	if len(hs.Failures) != 1 || hs.Failures[0].Host != "h00" || hs.Failures[0].Kind != policy.FailRebootFailed || hs.Failures[0].Grant != "g1" {
		t.Errorf("failures %+v", hs.Failures)
	}
	if _, ok := hs.Halts[policy.RolloutScope]; !ok {
		t.Fatalf("the rollout not halted: %+v", hs)
	}
	if got := plans["h00"].Phase; got != store.PhaseBackoff {
		t.Errorf("h00 is %s, want backoff (its failed reboot carried out)", got)
	}
	if p := plans["h01"]; p.Phase != store.PhasePending || !strings.HasPrefix(p.Waiting, "halted: the rollout halted at ") || p.WaitingKind != "halted" {
		t.Errorf("h01: %s waiting %q (%s)", p.Phase, p.Waiting, p.WaitingKind)
	}
	if slices.Contains(nodeCalls, "drain n-h01") {
		t.Errorf("h01 drained after the halt: %q", nodeCalls)
	}
	want := `
# HELP rollboot_cycle_failures_total Cycles that failed, by group and kind (stuck, reboot_failed, unhealthy, drain_aborted), as the failure budgets count them.
# TYPE rollboot_cycle_failures_total counter
rollboot_cycle_failures_total{group="default",kind="reboot_failed"} 1
# HELP rollboot_halted 1 while the scope (a group's name, or "rollout" for the whole rollout) is halted by its failure budget, until ` + "`rollboot resume`" + `; absent when it is not.
# TYPE rollboot_halted gauge
rollboot_halted{scope="rollout"} 1
`
	if err := testutil.GatherAndCompare(c.Registry(), strings.NewReader(want), "rollboot_halted", "rollboot_cycle_failures_total"); err != nil {
		t.Error(err)
	}
}

// A halt state that cannot be written leaves the failing decision for the
// next pass: the cycle is not ended behind a failure nobody recorded, and its
// slot stays taken.
func TestFailureNotRecordedIsNotCarriedOut(t *testing.T) {
	r := failurePass(t, "rollboot/halts", nil)
	plans, nodeCalls := r.plans, r.nodeCalls
	if r.passErr == nil {
		t.Error("the pass reported no error")
	}
	if got := plans["h00"].Phase; got != store.PhaseRebooting {
		t.Errorf("h00 is %s, want rebooting still (its failure not recorded)", got)
	}
	if len(nodeCalls) != 0 {
		t.Errorf("node calls %q, want none", nodeCalls)
	}
}

// A halt state that cannot be read holds every scope with a budget (fail
// closed); the hosts out still finish their cycle.
func TestUnreadableHaltsHold(t *testing.T) {
	newer := func(v *failingVars) {
		if _, _, err := v.CheckedCreate(&api.Variable{Path: "rollboot/halts", Items: api.VariableItems{"version": "9"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := failurePass(t, "", newer)
	plans, nodeCalls := r.plans, r.nodeCalls
	if r.haltsErr == nil {
		t.Error("the halt state read back")
	}
	if got := plans["h00"].Phase; got != store.PhaseBackoff {
		t.Errorf("h00 is %s, want backoff", got)
	}
	if p := plans["h01"]; p.Phase != store.PhasePending || p.WaitingKind != "halt_unknown" ||
		!strings.Contains(p.Waiting, "halt state cannot be read") {
		t.Errorf("h01: %s waiting %q (%s)", p.Phase, p.Waiting, p.WaitingKind)
	}
	if slices.Contains(nodeCalls, "drain n-h01") {
		t.Errorf("h01 drained: %q", nodeCalls)
	}
}

// Halt, the entry that halts a group for a reason of its own (a canary that
// failed), stores the halt with the hosts that made it, once; admission then
// holds the group's hosts until it is resumed.
func TestHaltGroupForAReason(t *testing.T) {
	ctx := context.Background()
	vars := &failingVars{memVars: newMemVars(&callLog{})}
	st := store.New(vars, "rollboot", "")
	c := New(Options{Deps: Deps{Store: st}, Runtime: Runtime{Now: func() time.Time { return t0 }}})
	s := &snapshot{now: t0}
	c.readHalts(ctx, s)
	canary := []policy.Failure{{Host: "web-1", Group: "web", Grant: "g1", Kind: policy.FailUnhealthy, At: t0}}
	if err := c.Halt(ctx, s, "web", "canary web-1 failed", canary); err != nil {
		t.Fatal(err)
	}
	if err := c.Halt(ctx, s, "web", "canary web-2 failed", nil); err != nil {
		t.Fatal(err)
	}
	hs, _, err := st.Halts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := policy.HaltOf(hs.Halts, "web")
	if !ok || h.Reason != "canary web-1 failed" || len(h.Failures) != 1 || len(hs.Log) != 1 {
		t.Fatalf("halt state %+v", hs)
	}
	if !strings.HasPrefix(h.Text(), `group "web" halted at `) || !strings.Contains(h.Text(), "canary web-1 failed; 1 failed cycle (web-1 unhealthy); rollboot resume -group web lifts it") {
		t.Errorf("text %q", h.Text())
	}
	vars.failPrefix = "rollboot/halts"
	if err := c.Halt(ctx, &snapshot{now: t0, halts: policy.HaltState{}, haltsIndex: 1}, "db", "canary db-1 failed", nil); err == nil {
		t.Error("a halt that could not be written reported no error")
	}
}

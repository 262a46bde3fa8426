package coordinator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// eligibleNodes is recNodes whose nodes' allocations are allocs[nodeID], each
// read logged as "allocs <node>" after the writes it follows.
type eligibleNodes struct {
	recNodes
	allocs map[string][]*api.Allocation
}

func (n eligibleNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	if err := n.log.do("allocs " + id); err != nil {
		return nil, nil, err
	}
	return n.allocs[id], &api.QueryMeta{LastIndex: 1}, nil
}

// rejoinPass stores, in the default group (one host out at once), h00 in
// phase (rejoining, or rebooting or drained with the rejoin to enter) with its
// node ready again but still ineligible, as Nomad keeps a drained node across
// its reboot, and h01 pending for the slot; h00's agent is back with a new boot
// ID. It runs one pass, with the server gates on, h00's node running allocs and
// its record changed by rec, and returns the plans after it, the calls to
// Nomad's nodes API, in order, and the pass's writes of h00's plan.
func rejoinPass(t *testing.T, phase string, allocs []*api.Allocation, rec func(*store.HostRecord), checks consulapi.HealthChecks) (map[string]store.Plan, []string, int) {
	t.Helper()
	ctx := context.Background()
	st, _, log, opt := rejoinFixture(t, phase, allocs, rec)
	if checks != nil { // the group waits for the node's Consul checks, read after the write
		opt.DefaultOptions.Healthy = rejoin.Settings{Deadline: time.Hour, OnDeadline: "hold", ConsulChecks: true}
		opt.ConsulHealth = loggedChecks{log: log, checks: checks}
	}
	c := New(opt)
	log.reset(0)
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	planWrites := len(slices.DeleteFunc(log.get(), func(call string) bool { return call != "put plan/h00" }))
	byHost, calls := plansAndNodeCalls(t, st, log)
	return byHost, slices.DeleteFunc(calls, func(call string) bool { return strings.HasSuffix(call, "n-h01") }), planWrites
}

// rejoinFixture stores, in the default group, h00 in phase with its node ready
// again but still ineligible and h01 pending for the slot, as rejoinPass
// describes, and returns the store, the node stubs, the log of the calls and
// the coordinator's options over them.
func rejoinFixture(t *testing.T, phase string, allocs []*api.Allocation, rec func(*store.HostRecord)) (*store.Store, []*api.NodeListStub, *callLog, Options) {
	t.Helper()
	log := &callLog{}
	st := store.New(newMemVars(log), "rollboot", "")
	stubs := putHosts(t, st, 2, backAndNextRecords(rec))
	stubs[0].SchedulingEligibility = api.NodeSchedulingIneligible
	// Its Nomad client started again after the drain: the sign from Nomad
	// that its host rebooted.
	stubs[0].Drivers = map[string]*api.DriverInfo{"raw_exec": {Detected: true, Healthy: true, UpdateTime: t0.Add(-time.Second)}}
	putBackAndNext(t, st, phase)
	nodes := eligibleNodes{recNodes: recNodes{log: log, nodes: stubs}, allocs: map[string][]*api.Allocation{"n-h00": allocs}}
	return st, stubs, log, Options{
		Deps:    Deps{Nodes: nodes, Store: st, Clusters: &recClusters{log: log}},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	}
}

// loggedChecks answers every node's Consul checks with checks, each read
// logged as "checks <node>".
type loggedChecks struct {
	log    *callLog
	checks consulapi.HealthChecks
}

func (l loggedChecks) Node(node string, _ *consulapi.QueryOptions) (consulapi.HealthChecks, *consulapi.QueryMeta, error) {
	if err := l.log.do("checks " + node); err != nil {
		return nil, nil, err
	}
	return l.checks, &consulapi.QueryMeta{LastIndex: 1}, nil
}

// healthyAlloc is a service allocation running on a node, healthy or (nil)
// still starting.
func healthyAlloc(healthy *bool) *api.Allocation {
	return &api.Allocation{Name: "web.web[0]", DesiredStatus: "run", ClientStatus: "running",
		Job: &api.Job{Type: new(api.JobTypeService)}, DeploymentStatus: &api.AllocDeploymentStatus{Healthy: healthy}}
}

// The pass that restores a rebooted node's eligibility reads its workloads
// after that write and, when they are healthy, closes the cycle and hands the
// slot on: no second pass waits for the node stream to show the eligibility.
// That holds too for the pass that sees the reboot (the host rebooting or
// drained before it). When the workloads or Consul checks read after the write
// are not healthy, the host runs servers, or its roles could not be read, the
// cycle stays open for the next pass. A cycle that closes goes from the plan
// stored before the pass to idle in one write, with no rejoining plan stored
// between (rejoinTogether).
func TestCycleClosesInThePassThatRestoresEligibility(t *testing.T) {
	yes := true
	rolesUnknown := func(r *store.HostRecord) { r.DiscoverError = "consul: connection refused" }
	for _, tc := range []struct {
		name     string
		phase    string // h00's phase before the pass; rejoining when empty
		allocs   []*api.Allocation
		rec      func(*store.HostRecord)
		checks   consulapi.HealthChecks
		closes   bool
		reads    []string // the node calls of h00's node, in order
		h01Phase string
	}{
		{"nothing on the node", "", nil, nil, nil, true, []string{"eligible n-h00", "allocs n-h00"}, store.PhaseDraining},
		{"healthy workloads", "", []*api.Allocation{healthyAlloc(&yes)}, nil, nil, true, []string{"eligible n-h00", "allocs n-h00"}, store.PhaseDraining},
		{"workloads starting", "", []*api.Allocation{healthyAlloc(nil)}, nil, nil, false, []string{"eligible n-h00", "allocs n-h00"}, store.PhasePending},
		{"consul checks passing", "", nil, nil, consulapi.HealthChecks{{Name: "web", Status: consulapi.HealthPassing}}, true,
			[]string{"eligible n-h00", "allocs n-h00", "checks h00"}, store.PhaseDraining},
		{"consul check failing", "", nil, nil, consulapi.HealthChecks{{Name: "web", Status: consulapi.HealthCritical}}, false,
			[]string{"eligible n-h00", "allocs n-h00", "checks h00"}, store.PhasePending},
		{"servers on the host", "", nil, func(r *store.HostRecord) {
			r.Servers = []store.Server{{Product: store.RoleNomadServer, Cluster: "global"}}
		}, nil, false, []string{"eligible n-h00"}, store.PhasePending},
		{"roles unknown", "", nil, rolesUnknown, nil, false, []string{"eligible n-h00", "allocs n-h00"}, store.PhasePending},
		// The node is back on its own word: its allocations are read once
		// the agent reports the new boot, not before.
		{"agent not back yet", "", []*api.Allocation{healthyAlloc(&yes)}, func(r *store.HostRecord) { r.BootID = "b1" }, nil, false,
			[]string{"eligible n-h00"}, store.PhasePending},
		{"reboot seen as rebooting", store.PhaseRebooting, nil, nil, nil, true, []string{"eligible n-h00", "allocs n-h00"}, store.PhaseDraining},
		{"reboot seen as drained", store.PhaseDrained, []*api.Allocation{healthyAlloc(&yes)}, nil, nil, true,
			[]string{"eligible n-h00", "allocs n-h00"}, store.PhaseDraining},
		{"reboot seen, workloads starting", store.PhaseRebooting, []*api.Allocation{healthyAlloc(nil)}, nil, nil, false,
			[]string{"eligible n-h00", "allocs n-h00"}, store.PhasePending},
		{"reboot seen, roles unknown", store.PhaseRebooting, nil, rolesUnknown, nil, false,
			[]string{"eligible n-h00", "allocs n-h00"}, store.PhasePending},
		{"reboot seen, servers on the host", store.PhaseRebooting, nil, func(r *store.HostRecord) {
			r.Servers = []store.Server{{Product: store.RoleNomadServer, Cluster: "global"}}
		}, nil, false, []string{"eligible n-h00"}, store.PhasePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phase := cmp.Or(tc.phase, store.PhaseRejoining)
			plans, calls, planWrites := rejoinPass(t, phase, tc.allocs, tc.rec, tc.checks)
			want := store.PhaseRejoining
			if tc.closes {
				want = store.PhaseIdle
			}
			if got := plans["h00"].Phase; got != want {
				t.Errorf("h00 is %s after the pass, want %s", got, want)
			}
			if got := plans["h01"].Phase; got != tc.h01Phase {
				t.Errorf("h01 is %s after the pass, want %s", got, tc.h01Phase)
			}
			if !slices.Equal(calls, tc.reads) {
				t.Errorf("calls on h00's node %q, want %q", calls, tc.reads)
			}
			wantWrites := 1 // its close, or its rejoin entered
			if !tc.closes && tc.phase == "" {
				wantWrites = 0 // rejoining still, as stored
			}
			if planWrites != wantWrites {
				t.Errorf("h00's plan written %d times in the pass, want %d", planWrites, wantWrites)
			}
		})
	}
}

// A pass that restored the eligibility of a host it saw back from its reboot
// and failed to store the close leaves the plan as stored before it (the host
// rebooting, its slot held), with the node eligible: the next passes see the
// reboot again and take the rejoin from there, as after a failure right after
// the eligibility write, without writing the eligibility again.
func TestRejoinAfterAFailedClose(t *testing.T) {
	ctx := context.Background()
	st, stubs, log, opt := rejoinFixture(t, store.PhaseRebooting, nil, nil)
	c := New(opt)
	log.reset(0)
	log.failOn = "put plan/h00"
	if err := c.ReconcileOnce(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("the pass returned %v, want the injected failure", err)
	}
	plans, calls := plansAndNodeCalls(t, st, log)
	if got := plans["h00"].Phase; got != store.PhaseRebooting {
		t.Fatalf("h00 is %s after the failed close, want %s as stored before", got, store.PhaseRebooting)
	}
	if got := plans["h01"].Phase; got != store.PhasePending {
		t.Fatalf("h01 is %s after the failed close, want %s: the slot is held", got, store.PhasePending)
	}
	if !slices.Contains(calls, "eligible n-h00") {
		t.Fatalf("calls %q: the eligibility was not restored", calls)
	}
	stubs[0].SchedulingEligibility = api.NodeSchedulingEligible // as the write left it
	log.reset(0)
	for range 2 {
		if err := c.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	plans, calls = plansAndNodeCalls(t, st, log)
	if got := plans["h00"].Phase; got != store.PhaseIdle {
		t.Errorf("h00 is %s after two more passes, want %s", got, store.PhaseIdle)
	}
	if got := plans["h01"].Phase; got != store.PhaseDraining {
		t.Errorf("h01 is %s after two more passes, want %s", got, store.PhaseDraining)
	}
	if slices.Contains(calls, "eligible n-h00") {
		t.Errorf("calls %q: the eligibility was written again", calls)
	}
}

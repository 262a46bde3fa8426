package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// What admission computes once per snapshot is computed again when the pass
// replaces what it was computed from: the plans (as Preview does), the rules,
// the workloads read. Each admission then decides as over a fresh snapshot.
func TestAdmitMemoFollowsTheSnapshot(t *testing.T) {
	hosts := []testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: time.Minute}, {name: "c"}}
	rules := func(concurrency int) admitRules {
		return admitRules{groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: concurrency}}, drainDeadline: time.Hour}
	}
	pools := func(s *snapshot) {
		for _, n := range s.nodes {
			n.NodePool = "default" // for the workload blockers
		}
	}
	fresh := func(r admitRules, plans map[string]store.Plan) admission {
		s := admitSnapshot(hosts, pools)
		s.plans = plans
		return admit(r, s)
	}
	s := admitSnapshot(hosts, pools)
	r1 := rules(1)
	if got := admit(r1, s); !got.admitted["a"] || got.admitted["b"] || got.wait["b"].Kind != phase.WaitQueued {
		t.Fatalf("first admission: %+v", got)
	}
	// Again over the same snapshot: the same decision.
	if got, want := admit(r1, s), fresh(r1, s.plans); !reflect.DeepEqual(got, want) {
		t.Errorf("second admission %+v, want %+v", got, want)
	}
	// Other rules: two slots.
	r2 := rules(2)
	if got := admit(r2, s); !got.admitted["a"] || !got.admitted["b"] {
		t.Errorf("with two slots: %+v", got)
	}
	// The plans replaced: a draining, c pending too.
	plans := maps.Clone(s.plans)
	plans["a"] = store.Plan{Host: "a", Phase: store.PhaseDraining, NodeID: "node-a"}
	plans["c"] = store.Plan{Host: "c", Phase: store.PhasePending, NodeID: "node-c", RequestedAt: t0}
	s.plans = plans
	got, want := admit(r2, s), fresh(r2, plans)
	if !reflect.DeepEqual(got, want) || got.admitted["a"] || !got.admitted["b"] || got.admitted["c"] {
		t.Errorf("after the plans changed: %+v, want %+v (a out, b admitted, c queued)", got, want)
	}
	if q := admissionQueue(s); len(q) != 2 || q[0].Host != "b" || q[1].Host != "c" {
		t.Errorf("queue %+v, want b and c", q)
	}
	if gs := groupStatuses(r2, s); len(gs) != 1 || gs[0].Active != 1 || gs[0].Size != 3 {
		t.Errorf("group statuses %+v, want one active of 3", gs)
	}
	// A workload blocker read since holds b.
	s.workloads = &workloadView{jobErr: errors.New("jobs: unreachable")}
	if got := admit(r2, s); got.admitted["b"] || got.wait["b"].Kind != phase.WaitWorkloadUnknown {
		t.Errorf("with the workloads read: %+v", got)
	}
}

// The admission the capacity gate's last round kept is the pass's own only
// while nothing it was made from changed: after any change to the plans, the
// rules, the alerts or workloads read, what the capacity gate read or the
// hosts whose agent would be lost, admitted decides as admit does.
func TestKeptAdmissionFollowsItsInputs(t *testing.T) {
	phases := []string{"", store.PhasePending, store.PhasePending, store.PhaseDraining, store.PhaseRebooting}
	stale := map[string]int{} // the seeds where the kept admission is stale
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 16))
		var hosts []testHost
		for i := range 2 + rng.IntN(6) {
			hosts = append(hosts, testHost{name: fmt.Sprintf("h%d", i), phase: phases[rng.IntN(len(phases))],
				at: time.Duration(rng.IntN(5)) * time.Minute})
		}
		s := admitSnapshot(hosts, func(s *snapshot) {
			for _, n := range s.nodes {
				n.NodePool = "default" // for the workload blockers
			}
		})
		r := admitRules{groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1 + rng.IntN(3)}}, drainDeadline: time.Hour}
		keepAdmission(r, s, admit(r, s))
		change := []string{"none", "plans", "rules", "alerts", "workloads", "capacity", "agent lost"}[rng.IntN(7)]
		switch change {
		case "plans":
			plans := maps.Clone(s.plans)
			for _, h := range hosts {
				if rng.IntN(2) == 0 {
					plans[h.name] = store.Plan{Host: h.name, Phase: phases[rng.IntN(len(phases))], Group: policy.DefaultGroupName,
						NodeID: "node-" + h.name, RequestedAt: t0.Add(-time.Hour)}
				}
			}
			s.plans = plans
		case "rules":
			r = admitRules{groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1 + rng.IntN(3)}}, drainDeadline: time.Hour}
		case "alerts":
			s.alerts = &alertgate.Verdict{Blocking: []string{"NodeDown"}}
		case "workloads":
			s.workloads = &workloadView{jobErr: errors.New("jobs: unreachable")}
		case "capacity":
			s.capacity = &capacityView{err: errors.New("allocations: unreachable")}
		case "agent lost":
			s.agentLost = map[string]phase.WaitReason{}
			for _, h := range hosts {
				s.agentLost[h.name] = phase.WaitFor(phase.WaitAgentNotOnNode, "default/rollboot")
			}
		}
		got, want := admitted(r, s), admit(r, s)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d, after %s: kept %+v, want %+v", seed, change, got, want)
		}
		if !reflect.DeepEqual(s.memo.last, want) {
			stale[change]++
		}
	}
	// Each change the key follows does change admission in some draws:
	// without it in the key, the kept admission would be handed out stale.
	for _, change := range []string{"plans", "rules", "alerts", "workloads", "capacity", "agent lost"} {
		if stale[change] == 0 {
			t.Errorf("no draw where %s changed what is admitted", change)
		}
	}
}

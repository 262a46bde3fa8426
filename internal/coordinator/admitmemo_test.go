package coordinator

import (
	"errors"
	"maps"
	"reflect"
	"testing"
	"time"

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
	if got := admit(r1, s); !got.admitted["a"] || got.admitted["b"] || got.wait["b"].Kind != WaitQueued {
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
	if got := admit(r2, s); got.admitted["b"] || got.wait["b"].Kind != WaitWorkloadUnknown {
		t.Errorf("with the workloads read: %+v", got)
	}
}

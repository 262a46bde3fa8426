package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// slowPlans is memVars whose plan writes take a while and count how many run at
// once.
type slowPlans struct {
	*memVars
	mu            sync.Mutex
	inFlight, max int
}

func (s *slowPlans) put(v *api.Variable, create bool) (*api.Variable, *api.WriteMeta, error) {
	if !strings.HasPrefix(v.Path, "rollboot/plan/") {
		return s.memVars.put(v, create)
	}
	s.mu.Lock()
	s.inFlight++
	s.max = max(s.max, s.inFlight)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // long enough for the others to start
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	return s.memVars.put(v, create)
}

func (s *slowPlans) CheckedCreate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return s.put(v, true)
}

func (s *slowPlans) CheckedUpdate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return s.put(v, false)
}

// slowStore is a store whose plan writes are slowPlans'.
func slowStore() (*slowPlans, *store.Store) {
	vars := &slowPlans{memVars: newMemVars(&callLog{})}
	return vars, store.New(vars, "rollboot", "")
}

// putHosts stores the records of n hosts h00, h01, ... (node n-<host>, set by
// rec), and returns their nodes, ready and eligible.
func putHosts(t *testing.T, st *store.Store, n int, rec func(i int, r *store.HostRecord)) []*api.NodeListStub {
	t.Helper()
	var stubs []*api.NodeListStub
	for i := range n {
		name := fmt.Sprintf("h%02d", i)
		r := store.HostRecord{Host: name, NodeID: "n-" + name}
		rec(i, &r)
		if _, err := st.PutHost(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		stubs = append(stubs, &api.NodeListStub{ID: "n-" + name, Name: name, Status: "ready", SchedulingEligibility: "eligible"})
	}
	return stubs
}

// passAndCount runs one pass of a coordinator over st and the nodes at now, and
// counts the plans in phase after it.
func passAndCount(t *testing.T, st *store.Store, nodes []*api.NodeListStub, now time.Time, phase string) int {
	t.Helper()
	ctx := context.Background()
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: &callLog{}, nodes: nodes}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return now }},
	})
	if err := c.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range plans {
		if p.Phase == phase {
			n++
		}
	}
	return n
}

// When many hosts need a reboot at once, one pass stores their pending plans
// side by side, at most PlanWriteParallelism at a time, and each is stored.
func TestManyPendingPlansAreStoredTogether(t *testing.T) {
	const hosts = 40
	vars, st := slowStore()
	stubs := putHosts(t, st, hosts, func(i int, r *store.HostRecord) {
		r.BootID, r.RebootRequired, r.RequestedAt = "b1", true, t0.Add(time.Duration(i)*time.Second)
	})
	// The default group's one slot is granted in the same pass (regrant.go).
	if pending := passAndCount(t, st, stubs, t0.Add(time.Minute), store.PhasePending); pending != hosts-1 {
		t.Errorf("%d of %d hosts pending after the pass, want all but the one granted", pending, hosts)
	}
	t.Logf("plan writes at once: at most %d", vars.max)
	if vars.max < 2 || vars.max > PlanWriteParallelism {
		t.Errorf("plan writes at once: at most %d, want 2 to %d", vars.max, PlanWriteParallelism)
	}
}

// When a wave of hosts comes back together, one pass closes their cycles side by
// side (history record, then plan, per host), and each closes.
func TestManyCyclesAreClosedTogether(t *testing.T) {
	const hosts = 30
	vars, st := slowStore()
	ctx := context.Background()
	stubs := putHosts(t, st, hosts, func(_ int, r *store.HostRecord) { r.BootID = "b2" })
	for _, n := range stubs {
		p := plan(store.PhaseRejoining, func(p *store.Plan) {
			p.Host, p.NodeID, p.Group = n.Name, n.ID, "default"
			p.Timeline[store.PhaseDraining] = t0.Add(-50 * time.Minute)
		})
		if _, err := st.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	idle := passAndCount(t, st, stubs, t0, store.PhaseIdle)
	hist, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if idle != hosts || len(hist) != hosts {
		t.Errorf("%d of %d hosts back in service, %d history records, after the pass", idle, hosts, len(hist))
	}
	t.Logf("plan writes at once: at most %d", vars.max)
	if vars.max < 2 || vars.max > PlanWriteParallelism {
		t.Errorf("plan writes at once: at most %d, want 2 to %d", vars.max, PlanWriteParallelism)
	}
}

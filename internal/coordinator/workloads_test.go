package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/workload"
	"github.com/rollboot/rollboot/internal/workloadread"
)

// fakeWorkloads serves jobs, deployments and evaluations, evaluating list
// filters with go-bexpr as Nomad does; it records the requests.
type fakeWorkloads struct {
	jobs   []*api.Job
	deps   []*api.Deployment
	evals  []*api.Evaluation
	fail   error
	mu     sync.Mutex // calls: the deployments and evaluations are listed side by side
	calls  []string
	allocs map[string][]*api.Allocation // by node ID
}

func (f *fakeWorkloads) called(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeWorkloads) ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error) {
	f.called("jobs " + q.Filter)
	if f.fail != nil {
		return nil, nil, f.fail
	}
	if q.Namespace != api.AllNamespacesNamespace {
		return nil, nil, errors.New("not every namespace asked")
	}
	ev, err := bexpr.CreateEvaluator(q.Filter)
	if err != nil {
		return nil, nil, err
	}
	var out []*api.JobListStub
	for _, j := range f.jobs {
		if ok, err := ev.Evaluate(j); err != nil || !ok {
			continue
		}
		out = append(out, &api.JobListStub{ID: *j.ID, Namespace: *j.Namespace, CreateIndex: *j.CreateIndex, Stop: j.Stop != nil && *j.Stop})
	}
	return out, &api.QueryMeta{}, nil
}

func (f *fakeWorkloads) ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	f.called("deployments")
	return f.deps, &api.QueryMeta{}, f.fail
}

func (f *fakeWorkloads) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	f.called("evals " + q.Filter)
	var out []*api.Evaluation
	for _, e := range f.evals {
		if e.Status == "blocked" {
			out = append(out, e)
		}
	}
	return out, &api.QueryMeta{}, f.fail
}

func (f *fakeWorkloads) JobAllocations(jobID string, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	f.called("job allocs " + q.Namespace + "/" + jobID)
	var out []*api.AllocationListStub
	for node, allocs := range f.allocs {
		for _, a := range allocs {
			if a.JobID == jobID && a.Namespace == q.Namespace {
				out = append(out, &api.AllocationListStub{NodeID: node, JobID: a.JobID, Namespace: a.Namespace,
					DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus})
			}
		}
	}
	return out, &api.QueryMeta{}, f.fail
}

// Allocations implements the part of NodesAPI the blockers use.
func (f *fakeWorkloads) Allocations(nodeID string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	f.called("allocs " + nodeID)
	return f.allocs[nodeID], &api.QueryMeta{}, nil
}

type workloadNodes struct {
	NodesAPI
	f *fakeWorkloads
}

func (n workloadNodes) Allocations(id string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	return n.f.Allocations(id, q)
}

func testJob(ns, id, pool string, meta map[string]string) *api.Job {
	return &api.Job{ID: pointerOf(id), Namespace: pointerOf(ns), NodePool: pointerOf(pool), Meta: meta, CreateIndex: pointerOf(uint64(7))}
}

func pointerOf[T any](v T) *T { return &v }

func TestWorkloadBlockers(t *testing.T) {
	block := map[string]string{"rollboot_block": "true"}
	running := func(job string) *api.Allocation {
		return &api.Allocation{Namespace: "default", JobID: job, DesiredStatus: "run", ClientStatus: "running"}
	}
	tests := []struct {
		name     string
		set      workload.Settings
		f        *fakeWorkloads
		wait     map[string]string // host -> part of its reason
		admitted []string
		calls    int // requests made; 0: not checked
		noCalls  bool
	}{
		{
			name:     "all off: nothing read",
			set:      workload.Settings{},
			f:        &fakeWorkloads{},
			admitted: []string{"a", "b"},
			noCalls:  true,
		},
		{
			name:     "defaults and a quiet cluster: one list each, no job listed",
			set:      workload.Default(),
			f:        &fakeWorkloads{deps: []*api.Deployment{{ID: "d1", Namespace: "default", JobID: "api", Status: "successful"}}},
			admitted: []string{"a", "b"},
			calls:    2,
		},
		{
			name: "a node running a blocking job is held, the other goes",
			set:  workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "backup", "default", block), testJob("default", "web", "default", nil)},
				allocs: map[string][]*api.Allocation{"node-a": {running("backup"), running("web")}, "node-b": {running("web")}}},
			wait:     map[string]string{"a": "runs allocations of job backup (workloads.job_filter)"},
			admitted: []string{"b"},
		},
		{
			name: "one blocking job: its allocations are read, not each node's",
			set:  workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "backup", "default", block)},
				allocs: map[string][]*api.Allocation{"node-b": {running("backup")}}},
			wait:     map[string]string{"b": "runs allocations of job backup"},
			admitted: []string{"a"},
			calls:    2, // the job list, the job's allocations
		},
		{
			name: "as many blocking jobs as hosts: each node's allocations are read",
			set:  workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "backup", "default", block), testJob("default", "nightly", "default", block)},
				allocs: map[string][]*api.Allocation{"node-a": {running("nightly"), running("backup")}, "node-b": {running("web")}}},
			wait:     map[string]string{"a": "runs allocations of jobs backup, nightly (workloads.job_filter)"},
			admitted: []string{"b"},
			calls:    3, // the job list, two nodes' allocations
		},
		{
			name: "a finished blocking allocation does not hold",
			set:  workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "backup", "default", block)},
				allocs: map[string][]*api.Allocation{"node-a": {{Namespace: "default", JobID: "backup", DesiredStatus: "run", ClientStatus: "complete"}}}},
			admitted: []string{"a", "b"},
		},
		{
			name:     "no job matches: no allocation read",
			set:      workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
			f:        &fakeWorkloads{jobs: []*api.Job{testJob("default", "web", "default", nil)}},
			admitted: []string{"a", "b"},
			calls:    1,
		},
		{
			name: "a running deployment holds its pool only",
			set:  workload.Default(),
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "api", "default", nil)},
				deps: []*api.Deployment{{ID: "d1", Namespace: "default", JobID: "api", JobCreateIndex: 7, Status: "running"}}},
			wait:     map[string]string{"a": "pool default: deployment d1 of job api is running"},
			admitted: []string{"b"},
		},
		{
			name: "a job of the pool all holds every pool",
			set:  workload.Default(),
			f: &fakeWorkloads{jobs: []*api.Job{testJob("ops", "agent", "all", nil)},
				deps: []*api.Deployment{{ID: "d1", Namespace: "ops", JobID: "agent", JobCreateIndex: 7, Status: "paused"}}},
			wait: map[string]string{"a": "pool default: deployment d1 of job ops/agent is paused", "b": "pool batch: deployment d1 of job ops/agent is paused"},
		},
		{
			name: "the deployment filter leaves a job out",
			set:  workload.Settings{Deployments: true, DeploymentFilter: `Meta.critical == "true"`},
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "api", "default", nil)},
				deps: []*api.Deployment{{ID: "d1", Namespace: "default", JobID: "api", JobCreateIndex: 7, Status: "running"}}},
			admitted: []string{"a", "b"},
		},
		{
			name: "blocked evaluations hold their pool",
			set:  workload.Default(),
			f: &fakeWorkloads{jobs: []*api.Job{testJob("default", "etl", "batch", nil)},
				evals: []*api.Evaluation{{ID: "e1", Namespace: "default", JobID: "etl", Status: "blocked"}, {ID: "e2", Namespace: "default", JobID: "etl", Status: "complete"}}},
			wait:     map[string]string{"b": "pool batch: 1 evaluation is blocked (job etl)"},
			admitted: []string{"a"},
		},
		{
			name: "a failed read holds every queued host, with the error",
			set:  workload.Default(),
			f:    &fakeWorkloads{fail: errors.New("Permission denied")},
			wait: map[string]string{"a": "cannot check the workload blockers: pool default: list the deployments: Permission denied", "b": "pool batch"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: time.Minute}}, nil)
			s.nodes["node-a"].NodePool = "default"
			s.nodes["node-b"].NodePool = "batch"
			c := &Coordinator{opt: Options{
				Deps:  Deps{WorkloadsAPI: tt.f, Nodes: workloadNodes{f: tt.f}},
				Rules: rules.Rules{Workloads: tt.set},
			}}
			c.readWorkloads(context.Background(), s, []string{"a", "b"})
			adm := admitSnap(admission.Rules{Groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 2}}, Gates: true, Workloads: true}, s)
			for h, want := range tt.wait {
				if got := adm.Wait[h].String(); !strings.Contains(got, want) {
					t.Errorf("%s waits for %q, want %q", h, got, want)
				}
			}
			for _, h := range tt.admitted {
				if !adm.Admitted[h] {
					t.Errorf("%s not admitted: %v", h, adm.Wait[h])
				}
			}
			if len(adm.Admitted) != len(tt.admitted) {
				t.Errorf("admitted %v, want %v", adm.Admitted, tt.admitted)
			}
			if tt.wait != nil && !adm.RecheckAt.Equal(t0.Add(admission.WorkloadRecheck)) {
				t.Errorf("next pass due at %v, want %v (the recheck)", adm.RecheckAt, t0.Add(admission.WorkloadRecheck))
			}
			if (tt.calls > 0 && len(tt.f.calls) != tt.calls) || (tt.noCalls && len(tt.f.calls) > 0) {
				t.Errorf("requests %q, want %d", tt.f.calls, tt.calls)
			}
		})
	}
}

// sideBySide answers the deployments list only once the blocked evaluations
// are asked for too (or after two seconds), and says whether they were.
type sideBySide struct {
	*fakeWorkloads
	probe *overlapProbe // begun by the evaluations, waited for by the deployments
}

func (f *sideBySide) ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	f.probe.wait()
	return f.fakeWorkloads.ListDeployments(q)
}

func (f *sideBySide) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	f.probe.begin()
	return f.fakeWorkloads.ListEvaluations(q)
}

// The deployments and the blocked evaluations are listed side by side: one
// round trip between a slot freed and the next drain, not two.
func TestWorkloadListsSideBySide(t *testing.T) {
	f := &sideBySide{fakeWorkloads: &fakeWorkloads{jobs: []*api.Job{testJob("default", "etl", "default", nil)},
		evals: []*api.Evaluation{{ID: "e1", Namespace: "default", JobID: "etl", Status: "blocked"}}}, probe: newOverlapProbe()}
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}}, inDefaultPool)
	c := &Coordinator{opt: Options{
		Deps:  Deps{WorkloadsAPI: f, Nodes: workloadNodes{f: f.fakeWorkloads}},
		Rules: rules.Rules{Workloads: workload.Default()},
	}}
	c.readWorkloads(context.Background(), s, []string{"a"})
	if !f.probe.overlap.Load() {
		t.Errorf("the deployments were listed alone (requests %q)", f.calls)
	}
	adm := admitSnap(admission.Rules{Groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1}}, Gates: true, Workloads: true}, s)
	if got, want := adm.Wait["a"].String(), "1 evaluation is blocked (job etl)"; !strings.Contains(got, want) {
		t.Errorf("a waits for %q, want %q", got, want)
	}
}

// A host held by a workload blocker is released by the recheck timer, not by
// the resync nor by a watch: here nothing the coordinator watches changes when
// the blocking batch job finishes (no agent job is watched, no host record
// changes), and the resync is 10 minutes, yet the node is drained within
// seconds of the job's end.
func TestWorkloadHoldReleasedByRecheck(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 1})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, _ := sim.Host("client-1")
	if err := sim.AddJob(nomadsim.JobSpec{ID: "backup", Type: api.JobTypeBatch, RunTime: 2 * time.Second,
		Meta: map[string]string{"rollboot_block": "true"}}); err != nil {
		t.Fatal(err)
	}
	requestReboot(ctx, t, st, h)
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st, WorkloadsAPI: workloadread.Nomad{Client: client}},
		Rules: rules.Rules{
			DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 1},
			Timing:       phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
			Workloads:    workload.Settings{JobFilter: `Meta.rollboot_block == "true"`},
		},
		Runtime: Runtime{Resync: 10 * time.Minute},
	})
	finished, drained := runUntilDrained(ctx, t, sim, co, "backup", nil)
	cancel()
	drainedWithinRecheck(t, finished, drained, admission.WorkloadRecheck, "the blocking job")
}

// drainedWithinRecheck checks that the drain started after what held it
// (what) finished, and at most a recheck (and some slack) later.
func drainedWithinRecheck(t *testing.T, finished, drained time.Time, recheck time.Duration, what string) {
	t.Helper()
	if finished.IsZero() || drained.Before(finished) {
		t.Fatalf("drained at %v, %s finished at %v", drained, what, finished)
	}
	if took := drained.Sub(finished); took > recheck+5*time.Second {
		t.Errorf("drained %s after %s finished: the recheck is %s", took, what, recheck)
	} else {
		t.Logf("drained %s after %s finished (recheck %s)", took.Round(time.Millisecond), what, recheck)
	}
}

// runUntilDrained runs co until the emulator shows a node drain, and returns
// when an allocation of job stopped first and when the drain started. before,
// if not nil, runs once Run has started. It fails the test if ctx ends first or
// Run fails.
func runUntilDrained(ctx context.Context, t *testing.T, sim *nomadsim.Sim, co *Coordinator, job string, before func()) (stopped, drained time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	if before != nil {
		before()
	}
	err := sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		for _, e := range v.Events() {
			switch {
			case e.Type == nomadsim.EventAllocStop && e.Details["job"] == job && stopped.IsZero():
				stopped = e.Time
			case e.Type == nomadsim.EventDrainStart && drained.IsZero():
				drained = e.Time
			}
		}
		return !drained.IsZero()
	})
	cancel()
	if err != nil {
		t.Fatalf("the node was not drained: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return stopped, drained
}

// requestReboot stores h's record, as its agent would, and a request to reboot
// it, as `rollboot request` would.
func requestReboot(ctx context.Context, t *testing.T, st *store.Store, h nomadsim.Host) {
	t.Helper()
	if _, err := st.PutHost(ctx, store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Requests = map[string]store.Request{h.Name: {At: time.Now()}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The workload blockers read for more hosts later in a pass (a hand-out, for
// the hosts of the group it frees a slot in) are kept beside those read
// before: a host read for earlier is not asked about again, nor forgotten.
func TestWorkloadReadsOfAPassAddUp(t *testing.T) {
	f := &fakeWorkloads{jobs: []*api.Job{testJob("default", "etl", "batch", nil)},
		evals: []*api.Evaluation{{ID: "e1", Namespace: "default", JobID: "etl", Status: "blocked"}}}
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: time.Minute}}, nil)
	s.nodes["node-a"].NodePool = "default"
	s.nodes["node-b"].NodePool = "batch"
	c := &Coordinator{opt: Options{Deps: Deps{WorkloadsAPI: f, Nodes: workloadNodes{f: f}}, Rules: rules.Rules{Workloads: workload.Default()}}}
	c.readWorkloads(context.Background(), s, []string{"b"})
	c.readWorkloads(context.Background(), s, []string{"a"})
	holds := s.workloads.holds
	if why, ok := holds["b"]; !ok || !strings.Contains(why.String(), "evaluation is blocked") {
		t.Errorf("b: %v (read: %v), want the blocked evaluation kept from the first read", why, ok)
	}
	if why, ok := holds["a"]; !ok || !why.IsZero() {
		t.Errorf("a: %v (read: %v), want read and not held", why, ok)
	}
}

package workloadread

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/workload"
)

// fakeAPI serves jobs (their filter evaluated by go-bexpr, as Nomad does on
// the whole job) and blocked evaluations; it counts the job lists.
type fakeAPI struct {
	jobs  []*api.Job
	evals []*api.Evaluation

	mu       sync.Mutex
	jobLists int
}

func (f *fakeAPI) ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error) {
	f.mu.Lock()
	f.jobLists++
	f.mu.Unlock()
	ev, err := bexpr.CreateEvaluator(q.Filter)
	if err != nil {
		return nil, nil, err
	}
	var out []*api.JobListStub
	for _, j := range f.jobs {
		if ok, err := ev.Evaluate(j); err == nil && ok {
			out = append(out, &api.JobListStub{ID: *j.ID, Namespace: *j.Namespace, Type: *j.Type, CreateIndex: 1})
		}
	}
	return out, &api.QueryMeta{}, nil
}

func (f *fakeAPI) ListDeployments(*api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{}, nil
}

func (f *fakeAPI) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	if q.Filter != `Status == "blocked"` {
		return nil, nil, nil
	}
	return f.evals, &api.QueryMeta{}, nil
}

func (f *fakeAPI) JobAllocations(string, *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{}, nil
}

func job(id, typ, pool string) *api.Job {
	ns := "default"
	return &api.Job{ID: &id, Namespace: &ns, Type: &typ, NodePool: &pool}
}

// blocked is a blocked evaluation as Nomad lists it: a system job's names the
// node its allocation did not fit (scheduler_system.go addBlocked).
func blocked(id, jobID, typ, node string) *api.Evaluation {
	return &api.Evaluation{ID: id, Namespace: "default", JobID: jobID, Type: typ, NodeID: node, Status: "blocked",
		TriggeredBy: "queued-allocs"}
}

// A system or sysbatch job's blocked evaluation holds neither its pool nor
// its node; a service or batch job's holds its pool.
func TestBlockedEvalHolds(t *testing.T) {
	jobs := []*api.Job{job("exporter", "system", "all"), job("etl", "batch", "batch"), job("web", "service", "web"),
		job("scan", "sysbatch", "web")}
	hosts := []Host{{Name: "web-1", NodeID: "node-web-1", Pool: "web"}, {Name: "web-2", NodeID: "node-web-2", Pool: "web"},
		{Name: "batch-1", NodeID: "node-batch-1", Pool: "batch"}}
	tests := []struct {
		name  string
		evals []*api.Evaluation
		// held: the hosts held, with part of their reason
		held map[string]string
		// jobLists: whether the pools' jobs were listed (only when an
		// evaluation may hold)
		jobLists bool
	}{
		{name: "none"},
		{
			name:  "a system job that does not fit a node holds nothing, not even that node",
			evals: []*api.Evaluation{blocked("e1", "exporter", "system", "node-web-1")},
		},
		{
			name:  "a sysbatch job's neither",
			evals: []*api.Evaluation{blocked("e1", "scan", "sysbatch", "node-web-2")},
		},
		{
			name:     "a batch job's holds its pool",
			evals:    []*api.Evaluation{blocked("e1", "exporter", "system", "node-batch-1"), blocked("e2", "etl", "batch", "")},
			held:     map[string]string{"batch-1": "pool batch: 1 evaluation is blocked (job etl)"},
			jobLists: true,
		},
		{
			name:     "a service job's holds its pool, a system job's beside it is not counted",
			evals:    []*api.Evaluation{blocked("e1", "exporter", "system", "node-web-1"), blocked("e2", "web", "service", "")},
			held:     map[string]string{"web-1": "pool web: 1 evaluation is blocked (job web)", "web-2": "pool web: 1 evaluation is blocked (job web)"},
			jobLists: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAPI{jobs: jobs, evals: tt.evals}
			r := Reader{API: f, Settings: workload.Settings{BlockedEvals: true}}
			holds := r.Holds(context.Background(), hosts)
			for _, h := range hosts {
				got, want := holds[h.Name], tt.held[h.Name]
				if want == "" {
					if got != (phase.WaitReason{}) {
						t.Errorf("%s held: %s", h.Name, got)
					}
					continue
				}
				if got.Kind != phase.WaitBlockedEvals || !strings.Contains(got.String(), want) {
					t.Errorf("%s waits for %q (%v), want %q", h.Name, got, got.Kind, want)
				}
			}
			if (f.jobLists > 0) != tt.jobLists {
				t.Errorf("%d job lists, want some: %v", f.jobLists, tt.jobLists)
			}
		})
	}
}

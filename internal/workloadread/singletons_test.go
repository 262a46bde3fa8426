package workloadread

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
)

// singletonAPI serves a job's allocations, or an error.
type singletonAPI struct {
	fakeAPI
	allocs map[string][]*api.AllocationListStub
	err    error
	reads  int
}

func (f *singletonAPI) JobAllocations(id string, _ *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	f.reads++
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.allocs[id], &api.QueryMeta{}, nil
}

// nodeAllocs serves each node's allocations.
type nodeAllocs map[string][]*api.Allocation

func (n nodeAllocs) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	return n[id], &api.QueryMeta{}, nil
}

func runningAlloc(jobID, group, typ string, count int, node string) *api.Allocation {
	ns := "default"
	return &api.Allocation{Namespace: ns, JobID: jobID, TaskGroup: group, NodeID: node,
		DesiredStatus: "run", ClientStatus: "running",
		Job: &api.Job{ID: &jobID, Type: &typ, TaskGroups: []*api.TaskGroup{{Name: &group, Count: &count}}}}
}

// The singleton reads: a node running a count = 1 group alone is held (its
// group holds singletons, no approval); an approval, a host whose group
// allows them, or a second healthy instance elsewhere lets it go; a failed
// read holds. Only the singleton's job is read, once for both hosts.
func TestSingletonReads(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	nodes := nodeAllocs{
		"n1": {runningAlloc("ledger", "db", "service", 1, "n1"), runningAlloc("web", "api", "service", 3, "n1"),
			runningAlloc("agent", "agent", "system", 1, "n1")},
		"n2": {runningAlloc("ledger", "db", "service", 1, "n2")},
	}
	ledgerOn := func(nodes ...string) map[string][]*api.AllocationListStub {
		var out []*api.AllocationListStub
		for _, n := range nodes {
			out = append(out, &api.AllocationListStub{TaskGroup: "db", NodeID: n, DesiredStatus: "run", ClientStatus: "running"})
		}
		return map[string][]*api.AllocationListStub{"ledger": out}
	}
	tests := []struct {
		name   string
		hosts  []Host
		allocs map[string][]*api.AllocationListStub
		err    error
		want   map[string]phase.WaitKind
		reads  int
	}{
		{name: "held", hosts: []Host{{Name: "h1", NodeID: "n1", Pool: "default", Singletons: true}},
			allocs: ledgerOn("n1"), want: map[string]phase.WaitKind{"h1": phase.WaitSingleton}, reads: 1},
		{name: "approved: nothing read", hosts: []Host{{Name: "h1", NodeID: "n1", Pool: "default", Singletons: true, ApprovedUntil: now.Add(time.Hour)}},
			allocs: ledgerOn("n1")},
		{name: "its group allows them: nothing read", hosts: []Host{{Name: "h1", NodeID: "n1", Pool: "default"}}, allocs: ledgerOn("n1")},
		{name: "two instances: neither is a singleton", hosts: []Host{{Name: "h1", NodeID: "n1", Pool: "default", Singletons: true},
			{Name: "h2", NodeID: "n2", Pool: "default", Singletons: true}}, allocs: ledgerOn("n1", "n2"), reads: 1},
		{name: "the job's allocations cannot be read: held", hosts: []Host{{Name: "h1", NodeID: "n1", Pool: "default", Singletons: true}},
			err: errors.New("boom"), want: map[string]phase.WaitKind{"h1": phase.WaitWorkloadUnknown}, reads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &singletonAPI{allocs: tt.allocs, err: tt.err}
			r := Reader{API: f, Nodes: nodes, Now: func() time.Time { return now }}
			holds := r.Holds(context.Background(), tt.hosts)
			for _, h := range tt.hosts {
				if got := holds[h.Name]; got.Kind != tt.want[h.Name] {
					t.Errorf("%s waits for %q, want kind %s", h.Name, got, tt.want[h.Name].Name())
				} else if got.Kind == phase.WaitSingleton && !strings.Contains(got.String(), "job group ledger.db (count = 1)") {
					t.Errorf("%s: %q does not name the job", h.Name, got)
				}
			}
			if f.reads != tt.reads {
				t.Errorf("%d job allocation reads, want %d", f.reads, tt.reads)
			}
		})
	}
}

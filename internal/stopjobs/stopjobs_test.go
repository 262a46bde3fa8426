package stopjobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/election"
)

func alloc(id, ns, job, desired, client string, migrate bool) *api.Allocation {
	a := &api.Allocation{ID: id, Name: job + "[0]", Namespace: ns, JobID: job, DesiredStatus: desired, ClientStatus: client}
	if migrate {
		a.DesiredTransition.Migrate = new(true)
	}
	return a
}

func TestToStop(t *testing.T) {
	tests := []struct {
		name  string
		alloc *api.Allocation
		jobs  []string
		want  bool
	}{
		{name: "running, job in any namespace", alloc: alloc("a", "default", "cache", "run", "running", false), jobs: []string{"cache"}, want: true},
		{name: "pending", alloc: alloc("a", "default", "cache", "run", "pending", false), jobs: []string{"cache"}, want: true},
		{name: "namespace/job", alloc: alloc("a", "ops", "cache", "run", "running", false), jobs: []string{"ops/cache"}, want: true},
		{name: "another namespace", alloc: alloc("a", "default", "cache", "run", "running", false), jobs: []string{"ops/cache"}},
		{name: "another job", alloc: alloc("a", "default", "web", "run", "running", false), jobs: []string{"cache"}},
		{name: "stopping already", alloc: alloc("a", "default", "cache", "stop", "running", false), jobs: []string{"cache"}},
		{name: "complete", alloc: alloc("a", "default", "cache", "run", "complete", false), jobs: []string{"cache"}},
		{name: "failed", alloc: alloc("a", "default", "cache", "run", "failed", false), jobs: []string{"cache"}},
		{name: "lost", alloc: alloc("a", "default", "cache", "run", "lost", false), jobs: []string{"cache"}},
		{name: "marked for migration", alloc: alloc("a", "default", "cache", "run", "running", true), jobs: []string{"cache"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(ToStop([]*api.Allocation{tt.alloc}, tt.jobs)) == 1; got != tt.want {
				t.Errorf("stopped: %t, want %t", got, tt.want)
			}
		})
	}
}

// world records the writes to a node and its allocations, in order.
type world struct {
	allocs  []*api.Allocation
	failOn  string // the ID of the allocation whose stop fails
	writes  []string
	readErr error
}

func (w *world) Allocations(string, *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	return w.allocs, &api.QueryMeta{}, w.readErr
}

func (w *world) ToggleEligibility(id string, eligible bool, _ *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error) {
	if eligible {
		w.writes = append(w.writes, "eligible "+id)
	} else {
		w.writes = append(w.writes, "ineligible "+id)
	}
	return &api.NodeEligibilityUpdateResponse{}, nil
}

func (w *world) Stop(a *api.Allocation, q *api.QueryOptions) (*api.AllocStopResponse, error) {
	if a.ID == w.failOn {
		return nil, errors.New("permission denied")
	}
	w.writes = append(w.writes, "stop "+q.Namespace+"/"+a.ID)
	return &api.AllocStopResponse{}, nil
}

// The node is made ineligible before the allocations are stopped, and
// nothing is written when none is to stop or the lease lapsed.
func TestStop(t *testing.T) {
	running := []*api.Allocation{
		alloc("c1", "default", "cache", "run", "running", false),
		alloc("w1", "default", "web", "run", "running", false),
		alloc("c2", "ops", "cache", "run", "running", false),
	}
	tests := []struct {
		name       string
		ctx        context.Context
		w          *world
		jobs       []string
		nilAllocs  bool
		wantWrites []string
		wantErr    string
		wantLogged int
	}{
		{name: "ineligible, then each stopped", w: &world{allocs: running}, jobs: []string{"cache"},
			wantWrites: []string{"ineligible n1", "stop default/c1", "stop ops/c2"}, wantLogged: 2},
		{name: "no job given: nothing read or written", w: &world{allocs: running, readErr: errors.New("not read")}},
		{name: "none of the jobs runs there: node left eligible", w: &world{allocs: running}, jobs: []string{"db"}},
		{name: "no allocations API", w: &world{allocs: running}, jobs: []string{"cache"}, nilAllocs: true,
			wantErr: "drain.stop_jobs: no allocations API configured"},
		{name: "the read fails", w: &world{readErr: errors.New("boom")}, jobs: []string{"cache"},
			wantErr: "drain.stop_jobs: allocations of node n1: boom"},
		{name: "a stop fails: the rest not tried", w: &world{allocs: running, failOn: "c1"}, jobs: []string{"cache"},
			wantWrites: []string{"ineligible n1"}, wantErr: "drain.stop_jobs: stop allocation c1 (cache[0]) on node n1: permission denied"},
		{name: "lease lapsed: nothing written", ctx: election.WithLapsedLease(context.Background()), w: &world{allocs: running},
			jobs: []string{"cache"}, wantErr: "drain.stop_jobs: mark node n1 ineligible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			var allocs Allocs = tt.w
			if tt.nilAllocs {
				allocs = nil
			}
			var logged bytes.Buffer
			err := Stop(ctx, tt.w, allocs, "n1", tt.jobs, slog.New(slog.NewTextHandler(&logged, nil)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(tt.w.writes, tt.wantWrites) {
				t.Errorf("writes %v, want %v", tt.w.writes, tt.wantWrites)
			}
			if n := strings.Count(logged.String(), "allocation stopped (drain.stop_jobs)"); n != tt.wantLogged {
				t.Errorf("%d stops logged, want %d:\n%s", n, tt.wantLogged, logged.String())
			}
		})
	}
}

package rejoinwatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocsource"
	"github.com/rollboot/rollboot/internal/store"
)

// The nodes watched are those of the hosts back in their rejoin (or stuck
// after it) with a node, but those whose agent has not reported yet.
func TestAllocNodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := func(host, ph, node string, rejoined bool) store.Plan {
		p := store.Plan{Host: host, Phase: ph, NodeID: node, Timeline: map[string]time.Time{}}
		if rejoined {
			p.Timeline[store.PhaseRejoining] = t0
		}
		return p
	}
	plans := map[string]store.Plan{
		"back":       plan("back", store.PhaseRejoining, "n-back", true),
		"jobs":       {Host: "jobs", Phase: store.PhaseRejoining, NodeID: "n-jobs", SystemJobs: []string{"agent"}},
		"no-node":    plan("no-node", store.PhaseRejoining, "", true),
		"stuck-back": plan("stuck-back", store.PhaseStuck, "n-stuck-back", true),
		"stuck-out":  plan("stuck-out", store.PhaseStuck, "n-stuck-out", false),
		"draining":   plan("draining", store.PhaseDraining, "n-draining", false),
		"awaiting":   plan("awaiting", store.PhaseRejoining, "n-awaiting", true),
	}
	got := slices.Sorted(maps.Keys(AllocNodes(plans, map[string]bool{"awaiting": true})))
	if want := []string{"n-back", "n-jobs", "n-stuck-back"}; !slices.Equal(got, want) {
		t.Errorf("AllocNodes = %q, want %q", got, want)
	}
}

// fakeAllocs answers blocking queries of a node's allocations as Nomad does:
// at once when the node's index is past the one asked, else once it moves
// past it or the query's context ends. Its queries are recorded.
type fakeAllocs struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	index   map[string]uint64
	allocs  map[string][]*api.Allocation
	asked   []uint64
	nodes   map[string]bool // the nodes asked about
	fail    error
}

func newFakeAllocs() *fakeAllocs {
	return &fakeAllocs{changed: make(chan struct{}), index: map[string]uint64{}, allocs: map[string][]*api.Allocation{}, nodes: map[string]bool{}}
}

func (f *fakeAllocs) set(node string, index uint64, allocs ...*api.Allocation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index[node], f.allocs[node] = index, allocs
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeAllocs) Allocations(node string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	for {
		f.mu.Lock()
		f.asked, f.nodes[node] = append(f.asked, q.WaitIndex), true
		if f.fail != nil {
			f.mu.Unlock()
			return nil, nil, f.fail
		}
		idx, allocs, changed := f.index[node], f.allocs[node], f.changed
		f.mu.Unlock()
		if idx > q.WaitIndex {
			return allocs, &api.QueryMeta{LastIndex: idx}, nil
		}
		select {
		case <-changed:
		case <-q.Context().Done():
			return nil, nil, q.Context().Err()
		}
	}
}

// sink keeps what the watches hand over, by node.
type sink struct {
	mu   sync.Mutex
	last map[string][]*api.Allocation
	set  map[string]bool
}

func (s *sink) SetAllocs(node string, allocs []*api.Allocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[node], s.set[node] = allocs, allocs != nil
}

func (s *sink) get(node string) ([]*api.Allocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[node], s.set[node]
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A watch starts from what the pass read (handed over at once, asked past its
// index), hands each change over before it pokes the loop, and forgets the
// node when it is no longer wanted; Stop ends every watch.
func TestAllocsWatchFromThePassRead(t *testing.T) {
	f := newFakeAllocs()
	f.set("n1", 5, &api.Allocation{ID: "a"})
	s := &sink{last: map[string][]*api.Allocation{}, set: map[string]bool{}}
	pokes := make(chan struct{}, 8)
	w := NewAllocs(context.Background(), f, s, func() { pokes <- struct{}{} })
	defer w.Stop()
	w.Set(map[string]bool{"n1": true}, map[string]allocsource.Read{"n1": {Index: 5, Allocs: []*api.Allocation{{ID: "a"}}}})
	eventually(t, "the pass's read not handed over", func() bool { a, ok := s.get("n1"); return ok && a[0].ID == "a" })
	eventually(t, "no query past the pass's read", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.asked) > 0
	})
	f.mu.Lock()
	first := f.asked[0]
	f.mu.Unlock()
	if first != 5 {
		t.Fatalf("the watch's first query waits past index %d, want 5 (the pass's read)", first)
	}
	select {
	case <-pokes:
		t.Fatal("the loop was poked with nothing changed since the pass's read")
	case <-time.After(20 * time.Millisecond):
	}
	f.set("n1", 7, &api.Allocation{ID: "b"})
	select {
	case <-pokes:
	case <-time.After(5 * time.Second):
		t.Fatal("a change did not poke the loop")
	}
	if a, ok := s.get("n1"); !ok || a[0].ID != "b" {
		t.Fatalf("at the poke the sink holds %v, want the change", a)
	}
	w.Set(map[string]bool{}, nil)
	eventually(t, "a node no longer wanted is not forgotten", func() bool { _, ok := s.get("n1"); return !ok })
}

// A failed query takes the node's allocations out of the sink: a pass reads
// them itself meanwhile.
func TestAllocsWatchFailureForgets(t *testing.T) {
	f := newFakeAllocs()
	f.set("n1", 3, &api.Allocation{ID: "a"})
	s := &sink{last: map[string][]*api.Allocation{}, set: map[string]bool{}}
	w := NewAllocs(context.Background(), f, s, func() {})
	defer w.Stop()
	w.Set(map[string]bool{"n1": true}, nil)
	eventually(t, "the first answer not handed over", func() bool { _, ok := s.get("n1"); return ok })
	f.mu.Lock()
	f.fail = errors.New("timeout")
	f.mu.Unlock()
	f.set("n1", 4)
	eventually(t, "a failed watch left its last answer in the sink", func() bool { _, ok := s.get("n1"); return !ok })
}

// consulNodes answers a node's checks with one check of each status given.
type consulNodes struct{ statuses []string }

func (c consulNodes) Node(node string, _ *consulapi.QueryOptions) (consulapi.HealthChecks, *consulapi.QueryMeta, error) {
	var out consulapi.HealthChecks
	for i, st := range c.statuses {
		out = append(out, &consulapi.HealthCheck{Node: node, CheckID: fmt.Sprint("c", i), Name: fmt.Sprint("check ", i), Status: st})
	}
	return out, &consulapi.QueryMeta{LastIndex: 1}, nil
}

// ReadChecks says what is missing rather than reading nothing: a Consul
// client, the node's name; and reads the node's checks otherwise.
func TestReadChecks(t *testing.T) {
	ctx := context.Background()
	if _, err := ReadChecks(ctx, nil, "n1"); err == nil {
		t.Error("no error without a Consul client")
	}
	if _, err := ReadChecks(ctx, consulNodes{}, ""); err == nil {
		t.Error("no error without the node's name")
	}
	checks, err := ReadChecks(ctx, consulNodes{statuses: []string{consulapi.HealthPassing, consulapi.HealthCritical}}, "n1")
	if err != nil || len(checks) != 2 {
		t.Fatalf("ReadChecks = %v, %v; want the node's two checks", checks, err)
	}
}

// At most MaxAllocWatches nodes are watched at once, the first by ID; when
// wanted nodes drop out, those left over are watched in their place.
func TestAllocWatchesBounded(t *testing.T) {
	f := newFakeAllocs()
	want := map[string]bool{}
	var ids []string
	for i := range MaxAllocWatches + 6 {
		id := fmt.Sprintf("n%02d", i)
		f.set(id, 1)
		want[id] = true
		ids = append(ids, id)
	}
	s := &sink{last: map[string][]*api.Allocation{}, set: map[string]bool{}}
	w := NewAllocs(context.Background(), f, s, func() {})
	defer w.Stop()
	asked := func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Sorted(maps.Keys(f.nodes))
	}
	w.Set(want, nil)
	eventually(t, "the first nodes not watched", func() bool { return len(asked()) >= MaxAllocWatches })
	time.Sleep(20 * time.Millisecond) // time for a watch past the bound to show
	if got := asked(); !slices.Equal(got, ids[:MaxAllocWatches]) {
		t.Fatalf("watched %v, want the first %d by ID", got, MaxAllocWatches)
	}
	for _, id := range ids[:6] {
		delete(want, id)
	}
	w.Set(want, nil)
	eventually(t, "the nodes left over not watched once others dropped out", func() bool { return len(asked()) == len(ids) })
	for _, id := range ids[:6] {
		eventually(t, "a node no longer wanted is not forgotten", func() bool { _, ok := s.get(id); return !ok })
	}
}

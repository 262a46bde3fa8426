package coordinator

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoinwatch"
	"github.com/rollboot/rollboot/internal/store"
)

// blockingNodes answers a read of a node's allocations at once, at index 7, and
// holds a blocking query until it ends; it records the index of each query.
type blockingNodes struct {
	NodesAPI
	mu      sync.Mutex
	asked   []uint64 // phase.WaitIndex of each query
	blocked chan struct{}
}

func (n *blockingNodes) Allocations(_ string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	n.asked = append(n.asked, q.WaitIndex)
	n.mu.Unlock()
	if q.WaitIndex > 0 {
		n.blocked <- struct{}{}
		<-q.Context().Done()
		return nil, nil, q.Context().Err()
	}
	return []*api.Allocation{{Name: "web.web[0]"}}, &api.QueryMeta{LastIndex: 7}, nil
}

func (n *blockingNodes) queries() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]uint64(nil), n.asked...)
}

// A pass reads a node's allocations once, the capacity gate's read included;
// the watch that the pass starts for the node begins from that read: it asks
// past its index, with the read kept as its answer, and pokes no pass for it.
func TestAllocWatchStartsFromThePassRead(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail() // a pass
	if _, err := c.systemJobs(t.Context(), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := capacityReads(c, "n2"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.allocs.OnNode(t.Context(), "n2"); err != nil || len(got) != 1 || got[0].Name != "web.web[0]" {
		t.Fatalf("the capacity gate's read in the same pass: %+v, %v", got, err)
	}
	if q := n.queries(); len(q) != 2 {
		t.Fatalf("queries %v in the pass, want two (n1's and the capacity gate's of n2)", q)
	}

	var pokes atomic.Int32
	w := rejoinwatch.NewAllocs(t.Context(), c.opt.Nodes, &c.mail, func() { pokes.Add(1) })
	defer w.Stop()
	plans := map[string]store.Plan{"h1": {Host: "h1", Phase: store.PhaseRejoining, NodeID: "n1", SystemJobs: []string{"default/agent"}}}
	w.Set(rejoinwatch.AllocNodes(plans, nil), c.allocs.TakeReads())
	select {
	case <-n.blocked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch did not block; queries %v", n.queries())
	}
	if q := n.queries(); len(q) != 3 || q[2] != 7 {
		t.Errorf("queries %v, want the pass's reads and then the watch's from index 7", q)
	}
	c.takeMail()                                    // the next pass
	kept, err := c.allocs.OnNode(t.Context(), "n1") // the watch's answer: no read
	if err != nil || len(kept) != 1 || kept[0].Name != "web.web[0]" || pokes.Load() != 0 || len(n.queries()) != 3 {
		t.Errorf("the watch kept %+v (%v) and poked %d passes, queries %v; want the pass's read, none and no new query", kept, err, pokes.Load(), n.queries())
	}
}

// The capacity gate's reads side by side are kept for the watches like its
// single ones, with the index each was answered at.
func TestCapacityReadsAreKept(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail()
	if err := capacityReads(c, "n1", "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if q := n.queries(); len(q) != 2 {
		t.Errorf("queries %v, want one per node", q)
	}
	kept := c.allocs.TakeReads()
	for _, id := range []string{"n1", "n2"} {
		if r, ok := kept[id]; !ok || r.Index != 7 || len(r.Allocs) != 1 {
			t.Errorf("node %s: kept %+v (%v)", id, r, ok)
		}
	}
}

// capacityReads has the capacity gate of c read the allocations of the nodes
// ids, as a pass that asks for them does (readCapacity), with no node listed.
func capacityReads(c *Coordinator, ids ...string) error {
	p := c.capacity.NewPass(nil, nil, 0, nil)
	c.capacity.Read(context.Background(), p, admission.CapacityNeeds{Allocs: ids})
	return p.Gate.Err
}

// The read of a rejoining host's workloads right after its eligibility is
// given back (healthNow) is the pass's: the allocation watch the pass then
// starts for the host, which still waits for them, asks past its index
// instead of reading the same allocations again.
func TestHealthReadIsKeptForTheWatch(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail() // a pass
	p := store.Plan{Host: "h1", Phase: store.PhaseRejoining, NodeID: "n1"}
	o := c.healthNow(t.Context(), &snapshot{}, p, "", "n1")
	if o == nil || o.AllocsErr != nil || len(o.Allocs) != 1 {
		t.Fatalf("health read: %+v", o)
	}
	w := rejoinwatch.NewAllocs(t.Context(), c.opt.Nodes, &c.mail, func() {})
	defer w.Stop()
	w.Set(rejoinwatch.AllocNodes(map[string]store.Plan{"h1": p}, nil), c.allocs.TakeReads())
	select {
	case <-n.blocked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch did not block; queries %v", n.queries())
	}
	if q := n.queries(); len(q) != 2 || q[0] != 0 || q[1] != 7 {
		t.Errorf("queries %v, want the health read and then the watch's from its index 7", q)
	}
}

// A rejoining host's allocations are watched only once its rejoin has come to
// their checks: not while its agent has not reported the reboot, nor while its
// node is not ready (its readiness comes with the node list, which wakes a
// pass): a watch then would read them for nothing.
func TestAllocsNotWatchedBeforeTheChecks(t *testing.T) {
	n := &blockingNodes{blocked: make(chan struct{}, 1)}
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail() // a pass
	s := &snapshot{plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
	for _, h := range []struct {
		name, boot, status string
	}{{"back", "b2", api.NodeStatusReady}, {"booting", "b2", api.NodeStatusInit}, {"silent", "b1", api.NodeStatusReady}} {
		s.plans[h.name] = store.Plan{Host: h.name, Phase: store.PhaseRejoining, NodeID: "n-" + h.name, BootIDAtGrant: "b1", EligibleBefore: true}
		s.hosts[h.name] = &hostView{rec: &store.HostRecord{Host: h.name, BootID: h.boot},
			node: &phase.NodeView{ID: "n-" + h.name, Status: h.status, Eligible: h.status == api.NodeStatusReady}}
	}
	s.names = slices.Sorted(maps.Keys(s.hosts))
	s.listBusy()
	c.readNodeDetails(t.Context(), s)
	got := slices.Sorted(maps.Keys(rejoinwatch.AllocNodes(s.plans, c.beforeChecks)))
	if !slices.Equal(got, []string{"n-back"}) {
		t.Errorf("watched %v, want n-back alone (booting's node is not ready, silent's agent has not reported)", got)
	}
}

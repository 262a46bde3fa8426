package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacityread"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// capNodes is a NodesAPI for the capacity gate: each node has 4000 MHz and 8
// GiB, 1 GiB of it reserved, and the allocations given; it counts its reads.
type capNodes struct {
	NodesAPI
	allocs    map[string][]*api.Allocation
	failAlloc string
	meta      map[string]map[string]string // by node ID
	mu        sync.Mutex
	reads     []string
	// infoTakes: how long an Info read takes; inInfo, mostInInfo: how many
	// are under way, and the most at once.
	infoTakes          time.Duration
	inInfo, mostInInfo int
}

func (n *capNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.mu.Lock()
	n.reads = append(n.reads, "info "+id)
	n.inInfo++
	n.mostInInfo = max(n.mostInInfo, n.inInfo)
	n.mu.Unlock()
	time.Sleep(n.infoTakes)
	n.mu.Lock()
	n.inInfo--
	n.mu.Unlock()
	return &api.Node{ID: id, Name: id, NodePool: "default", Datacenter: "dc1", Meta: n.meta[id],
		NodeResources:     &api.NodeResources{Cpu: api.NodeCpuResources{CpuShares: 4000}, Memory: api.NodeMemoryResources{MemoryMB: 8192}},
		ReservedResources: &api.NodeReservedResources{Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}},
	}, &api.QueryMeta{}, nil
}

func (n *capNodes) Allocations(id string, _ *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.mu.Lock()
	n.reads = append(n.reads, "allocs "+id)
	n.mu.Unlock()
	if id == n.failAlloc {
		return nil, nil, errInjected
	}
	return n.allocs[id], &api.QueryMeta{}, nil
}

func capAlloc(name, typ string, memMB int64) *api.Allocation {
	return &api.Allocation{Name: name, DesiredStatus: "run", ClientStatus: "running",
		Job: &api.Job{Type: &typ, NodePool: pointerTo("default"), Datacenters: []string{"*"}},
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"t": {Cpu: api.AllocatedCpuResources{CpuShares: 100}, Memory: api.AllocatedMemoryResources{MemoryMB: memMB}}}}}
}

func pointerTo[T any](v T) *T { return &v }

// stopping: the scheduler stopped it, its client still runs it.
func stopping(a *api.Allocation) *api.Allocation { a.DesiredStatus = "stop"; return a }

// stopped: its client reported it complete.
func stopped(a *api.Allocation) *api.Allocation {
	a.DesiredStatus, a.ClientStatus = "stop", "complete"
	return a
}

func TestCapacityGate(t *testing.T) {
	// Nodes node-a and node-b are pending; node-c .. node-j idle candidates
	// (7 GiB free each unless their allocations say otherwise).
	idle := []string{"c", "d", "e", "f", "g", "h", "i", "j"}
	tests := []struct {
		name        string
		off         bool
		headroom    float64
		concurrency int
		allocs      map[string][]*api.Allocation
		draining    string            // a node already draining
		phases      map[string]string // the phases of idle hosts' plans
		failAlloc   string
		wantAdmit   []string
		wantWait    map[string]string
		maxReads    int // at most this many reads (0: not checked)
	}{
		{name: "fits: reads the host and two candidates", concurrency: 1,
			allocs:    map[string][]*api.Allocation{"node-a": {capAlloc("web.web[0]", "service", 4096)}},
			wantAdmit: []string{"a"}, wantWait: map[string]string{}, maxReads: 5},
		{name: "the host admitted first takes the room", concurrency: 2,
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("web.web[0]", "service", 6144)},
				"node-b": {capAlloc("web.web[1]", "service", 6144)},
				"node-c": {capAlloc("x.x[0]", "service", 1024)}, "node-d": {capAlloc("x.x[1]", "service", 7168)},
				"node-e": {capAlloc("x.x[2]", "service", 7168)}, "node-f": {capAlloc("x.x[3]", "service", 7168)},
				"node-g": {capAlloc("x.x[4]", "service", 7168)}, "node-h": {capAlloc("x.x[5]", "service", 7168)},
				"node-i": {capAlloc("x.x[6]", "service", 7168)}, "node-j": {capAlloc("x.x[7]", "service", 7168)},
			},
			wantAdmit: []string{"a"}, wantWait: map[string]string{"b": "capacity: pool default: needs 12 GiB memory, 6 GiB free"}},
		{name: "a draining node's allocations need room first", concurrency: 1, draining: "c",
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("web.web[0]", "service", 4096)},
				"node-c": {capAlloc("big.big[0]", "service", 7168), capAlloc("big.big[1]", "service", 7168)},
				"node-d": {capAlloc("x.x[1]", "service", 7168)}, "node-e": {capAlloc("x.x[2]", "service", 7168)},
				"node-f": {capAlloc("x.x[3]", "service", 7168)}, "node-g": {capAlloc("x.x[4]", "service", 7168)},
				"node-h": {capAlloc("x.x[5]", "service", 7168)}, "node-i": {capAlloc("x.x[6]", "service", 6144)},
				"node-j": {capAlloc("x.x[7]", "service", 6144)},
			},
			wantWait: map[string]string{"a": "capacity: pool default: needs 18 GiB memory, 9 GiB free"}},
		{name: "a host draining whose drain the node list does not show yet", concurrency: 2,
			phases: map[string]string{"c": store.PhaseDraining},
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("web.web[0]", "service", 4096)},
				"node-c": {capAlloc("big.big[0]", "service", 4096)},
				"node-d": {capAlloc("x.x[1]", "service", 7168)}, "node-e": {capAlloc("x.x[2]", "service", 7168)},
				"node-f": {capAlloc("x.x[3]", "service", 7168)}, "node-g": {capAlloc("x.x[4]", "service", 7168)},
				"node-h": {capAlloc("x.x[5]", "service", 7168)}, "node-i": {capAlloc("x.x[6]", "service", 7168)},
				"node-j": {capAlloc("x.x[7]", "service", 7168)},
			},
			// a gives the slot it cannot use to b, which cannot use it either.
			wantWait: map[string]string{"a": "capacity: pool default: needs 8 GiB memory, 7 GiB free",
				"b": "capacity: pool default: needs 4 GiB memory, 3 GiB free"}},
		{name: "a rejoining host's new allocations do not move, and it takes more", concurrency: 2,
			phases: map[string]string{"c": store.PhaseRejoining},
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("web.web[0]", "service", 6144)},
				"node-b": {capAlloc("y.y[0]", "service", 7168)},
				"node-c": {capAlloc("big.big[0]", "service", 1024)},
				"node-d": {capAlloc("x.x[1]", "service", 7168)}, "node-e": {capAlloc("x.x[2]", "service", 7168)},
				"node-f": {capAlloc("x.x[3]", "service", 7168)}, "node-g": {capAlloc("x.x[4]", "service", 7168)},
				"node-h": {capAlloc("x.x[5]", "service", 7168)}, "node-i": {capAlloc("x.x[6]", "service", 7168)},
				"node-j": {capAlloc("x.x[7]", "service", 7168)},
			},
			wantAdmit: []string{"a"}, wantWait: map[string]string{}},
		{name: "a stopping allocation keeps its room until its client stopped it, and does not move", concurrency: 1,
			allocs: map[string][]*api.Allocation{
				"node-a": {stopping(capAlloc("old.old[0]", "service", 7168)), capAlloc("web.web[0]", "service", 2048)},
				"node-b": {stopping(capAlloc("old.old[1]", "service", 6144)), stopped(capAlloc("old.old[2]", "service", 1024))},
				"node-c": {capAlloc("x.x[0]", "service", 7168)}, "node-d": {capAlloc("x.x[1]", "service", 7168)},
				"node-e": {capAlloc("x.x[2]", "service", 7168)}, "node-f": {capAlloc("x.x[3]", "service", 7168)},
				"node-g": {capAlloc("x.x[4]", "service", 7168)}, "node-h": {capAlloc("x.x[5]", "service", 7168)},
				"node-i": {capAlloc("x.x[6]", "service", 7168)}, "node-j": {capAlloc("x.x[7]", "service", 7168)},
			},
			wantWait: map[string]string{"a": "capacity: pool default: needs 2 GiB memory, 1 GiB free"}},
		{name: "system allocations do not move", concurrency: 1,
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("exporter.exporter[0]", "system", 7168)},
				"node-c": {capAlloc("x.x[0]", "service", 7168)}, "node-d": {capAlloc("x.x[1]", "service", 7168)},
				"node-e": {capAlloc("x.x[2]", "service", 7168)}, "node-f": {capAlloc("x.x[3]", "service", 7168)},
				"node-g": {capAlloc("x.x[4]", "service", 7168)}, "node-h": {capAlloc("x.x[5]", "service", 7168)},
				"node-i": {capAlloc("x.x[6]", "service", 7168)}, "node-j": {capAlloc("x.x[7]", "service", 7168)},
			},
			wantAdmit: []string{"a"}, wantWait: map[string]string{}},
		{name: "headroom", concurrency: 1, headroom: 0.5,
			allocs: map[string][]*api.Allocation{
				"node-a": {capAlloc("web.web[0]", "service", 4096)},
				"node-c": {capAlloc("x.x[0]", "service", 1024)}, "node-d": {capAlloc("x.x[1]", "service", 1024)},
				"node-e": {capAlloc("x.x[2]", "service", 1024)}, "node-f": {capAlloc("x.x[3]", "service", 1024)},
				"node-g": {capAlloc("x.x[4]", "service", 1024)}, "node-h": {capAlloc("x.x[5]", "service", 1024)},
				"node-i": {capAlloc("x.x[6]", "service", 1024)}, "node-j": {capAlloc("x.x[7]", "service", 1024)},
			},
			wantWait: map[string]string{"a": "capacity: pool default: web.web[0] needs 100 MHz CPU, 4 GiB memory on one node, and no node has that much free"}},
		{name: "a read fails: held with the error", concurrency: 1, failAlloc: "node-a",
			wantWait: map[string]string{"a": "capacity: cannot tell: read the allocations of node node-a: injected failure"}},
		{name: "off: only the admitted host's system jobs read", off: true, concurrency: 1,
			allocs:    map[string][]*api.Allocation{"node-a": {capAlloc("web.web[0]", "service", 1<<20)}},
			wantAdmit: []string{"a"}, wantWait: map[string]string{}, maxReads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts := []testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: 1}}
			for _, h := range idle {
				hosts = append(hosts, testHost{name: h, phase: tt.phases[h]})
			}
			s := admitSnapshot(hosts, func(s *snapshot) {
				for _, n := range s.nodes {
					n.NodePool, n.Datacenter = "default", "dc1"
				}
				if tt.draining != "" {
					s.nodes["node-"+tt.draining].Drain = true
				}
			})
			if tt.concurrency == 1 {
				delete(s.plans, "b")
			}
			nodes := &capNodes{allocs: tt.allocs, failAlloc: tt.failAlloc}
			c := New(Options{
				Deps: Deps{Nodes: nodes},
				Rules: rules.Rules{
					Capacity:     rules.CapacityGate{Enabled: !tt.off, Headroom: tt.headroom},
					DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: tt.concurrency},
				},
			})
			adm := c.admit(context.Background(), s)
			var got []string
			for h := range adm.Admitted {
				got = append(got, h)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantAdmit) {
				t.Errorf("admitted %v, want %v", got, tt.wantAdmit)
			}
			gotWait := map[string]string{}
			for h, w := range adm.Wait {
				gotWait[h] = w.String()
			}
			for h, w := range tt.wantWait {
				if gotWait[h] != w {
					t.Errorf("%s waits %q, want %q", h, gotWait[h], w)
				}
			}
			for h, w := range gotWait {
				if strings.HasPrefix(w, "capacity") && tt.wantWait[h] == "" {
					t.Errorf("%s held: %q", h, w)
				}
			}
			switch {
			case tt.maxReads < 0 && len(nodes.reads) > 0:
				t.Errorf("reads %v, want none", nodes.reads)
			case tt.maxReads > 0 && len(nodes.reads) > tt.maxReads:
				t.Errorf("%d reads %v, want at most %d", len(nodes.reads), nodes.reads, tt.maxReads)
			}
		})
	}
}

// An idle cluster costs nothing: with nobody queued the gate reads nothing.
func TestCapacityGateIdle(t *testing.T) {
	s := admitSnapshot([]testHost{{name: "a"}, {name: "b"}}, nil)
	nodes := &capNodes{}
	c := capacityCoordinator(nodes, 1)
	c.admit(context.Background(), s)
	if len(nodes.reads) > 0 || s.capacity != nil {
		t.Errorf("reads %v on an idle cluster", nodes.reads)
	}
}

// On a large cluster with room, a check reads the host's node and a couple of
// others, not the pool: the candidates are read lazily, twice as many each
// round, only until the allocations fit.
func TestCapacityGateReadsFewAtScale(t *testing.T) {
	hosts := []testHost{{name: "a", phase: store.PhasePending}}
	for i := range 5000 {
		hosts = append(hosts, testHost{name: fmt.Sprintf("n%04d", i)})
	}
	s := admitSnapshot(hosts, inDefaultPool)
	nodes := &capNodes{allocs: map[string][]*api.Allocation{"node-a": {
		capAlloc("web.web[0]", "service", 4096), capAlloc("web.web[1]", "service", 4096), capAlloc("db.db[0]", "service", 2048)}}}
	c := capacityCoordinator(nodes, 1)
	if adm := c.admit(context.Background(), s); !adm.Admitted["a"] {
		t.Fatalf("a not admitted: %v", adm.Wait["a"])
	}
	t.Logf("%d reads for 5001 nodes: %v", len(nodes.reads), nodes.reads)
	if len(nodes.reads) > 9 {
		t.Errorf("%d reads, want a handful", len(nodes.reads))
	}
}

// sideNodes tells whether a candidate's node was asked for while its
// allocations were being read: in the same round of the gate's reads.
type sideNodes struct {
	*capNodes
	probe *overlapProbe // begun by a node read, waited for by a candidate's allocations
}

func (n *sideNodes) Allocations(id string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	if id != "node-q" {
		n.probe.wait()
	}
	return n.capNodes.Allocations(id, q)
}

func (n *sideNodes) Info(id string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	n.probe.begin()
	return n.capNodes.Info(id, q)
}

// The candidates' allocations and their nodes are read side by side, in one
// round trip.
func TestCapacityGateReadsAllocationsAndNodesSideBySide(t *testing.T) {
	hosts := []testHost{{name: "q", phase: store.PhasePending}}
	for i := range 6 {
		hosts = append(hosts, testHost{name: fmt.Sprintf("b%02d", i)})
	}
	s := admitSnapshot(hosts, inDefaultPool)
	nodes := &sideNodes{capNodes: &capNodes{allocs: map[string][]*api.Allocation{"node-q": {capAlloc("q.web[0]", "service", 1024)}}},
		probe: newOverlapProbe()}
	c := capacityCoordinator(nodes, 1)
	if adm := c.admit(context.Background(), s); !adm.Admitted["q"] {
		t.Fatalf("q not admitted: %v", adm.Wait["q"])
	}
	if !nodes.probe.overlap.Load() {
		t.Errorf("no node asked for while the candidates' allocations were read (reads %v): a round trip more", nodes.reads)
	}
}

// The moved allocations go only to nodes meeting their job's, group's and
// tasks' constraints, which interpolate the nodes as read (meta here).
func TestCapacityGateConstraints(t *testing.T) {
	idle := []string{"c", "d", "e", "f", "g", "h", "i", "j"}
	constrained := func(mem int64) *api.Allocation {
		a := capAlloc("web.web[0]", "service", mem)
		a.JobID, a.TaskGroup = "web", "web"
		a.Job.TaskGroups = []*api.TaskGroup{
			{Name: pointerTo("other"), Constraints: []*api.Constraint{api.NewConstraint("${meta.rack}", "=", "nowhere")}},
			{Name: pointerTo("web"), Constraints: []*api.Constraint{api.NewConstraint("${meta.rack}", "!=", "r2")},
				Tasks: []*api.Task{{Name: "t", Constraints: []*api.Constraint{api.NewConstraint("${meta.rack}", "is_set", "")}}}},
		}
		return a
	}
	tests := []struct {
		name      string
		racks     map[string]string // by idle host; others r2
		allocs    map[string][]*api.Allocation
		wantAdmit bool
		wantWait  string
	}{
		{name: "one node meets them and has room", racks: map[string]string{"j": "r1"},
			allocs: map[string][]*api.Allocation{"node-a": {constrained(4096)}}, wantAdmit: true},
		{name: "the node meeting them is full", racks: map[string]string{"j": "r1"},
			allocs:   map[string][]*api.Allocation{"node-a": {constrained(4096)}, "node-j": {capAlloc("x.x[0]", "service", 6144)}},
			wantWait: "capacity: pool default, on the nodes meeting the constraints of job web: needs 4 GiB memory, 1 GiB free"},
		{name: "no node meets them", racks: map[string]string{"j": ""},
			allocs:   map[string][]*api.Allocation{"node-a": {constrained(4096)}},
			wantWait: `capacity: pool default: no eligible node satisfies the constraints of job web (1 allocation): "${meta.rack} != r2" excluded 7 nodes, "${meta.rack} is_set" excluded 1 node`},
		{name: "the other group's constraints do not apply", racks: map[string]string{"c": "r3"},
			allocs: map[string][]*api.Allocation{"node-a": {constrained(4096)}}, wantAdmit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts := []testHost{{name: "a", phase: store.PhasePending}}
			meta := map[string]map[string]string{}
			for _, h := range idle {
				hosts = append(hosts, testHost{name: h})
				r, ok := tt.racks[h]
				switch {
				case !ok:
					meta["node-"+h] = map[string]string{"rack": "r2"}
				case r != "":
					meta["node-"+h] = map[string]string{"rack": r}
				}
			}
			s := admitSnapshot(hosts, func(s *snapshot) {
				for _, n := range s.nodes {
					n.NodePool, n.Datacenter = "default", "dc1"
				}
			})
			nodes := &capNodes{allocs: tt.allocs, meta: meta}
			c := capacityCoordinator(nodes, 1)
			adm := c.admit(context.Background(), s)
			if adm.Admitted["a"] != tt.wantAdmit {
				t.Errorf("admitted %v, want %v (waits %q)", adm.Admitted["a"], tt.wantAdmit, adm.Wait["a"].String())
			}
			if got := adm.Wait["a"].String(); tt.wantWait != "" && got != tt.wantWait {
				t.Errorf("waits %q\nwant  %q", got, tt.wantWait)
			}
		})
	}
}

// With many hosts queued for one slot, the gate reads the allocations of the
// first in line, and of the next ones only as those before them do not fit:
// not those of every queued host. A host that does not fit still gives its
// slot to the next.
func TestCapacityGateReadsTheQueueLazily(t *testing.T) {
	tests := []struct {
		name      string
		tooBig    int // the first tooBig hosts in line never fit
		wantAdmit string
		maxQueued int // at most this many queued hosts' nodes read (-1: any)
	}{
		{name: "the first fits", wantAdmit: "q00", maxQueued: 1},
		// Each that does not fit has every candidate read, queued hosts' nodes included.
		{name: "the first three do not", tooBig: 3, wantAdmit: "q03", maxQueued: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hosts []testHost
			allocs := map[string][]*api.Allocation{}
			for i := range 10 { // the candidates tried first (by node ID)
				hosts = append(hosts, testHost{name: fmt.Sprintf("b%d", i)})
			}
			for i := range 40 {
				name := fmt.Sprintf("q%02d", i)
				hosts = append(hosts, testHost{name: name, phase: store.PhasePending, at: time.Duration(i) * time.Second})
				mem := int64(1024)
				if i < tt.tooBig {
					mem = 16384
				}
				allocs["node-"+name] = []*api.Allocation{capAlloc(name+".web[0]", "service", mem)}
			}
			s := admitSnapshot(hosts, inDefaultPool)
			nodes := &capNodes{allocs: allocs}
			c := capacityCoordinator(nodes, 1)
			c.admit(context.Background(), s)
			if s.capacity.Gate.Err != nil {
				t.Fatal(s.capacity.Gate.Err)
			}
			adm := admitSnap(c.admitRules(), s)
			if !adm.Admitted[tt.wantAdmit] || len(adm.Admitted) != 1 {
				t.Errorf("admitted %v, want %s alone (it waits: %v)", adm.Admitted, tt.wantAdmit, adm.Wait[tt.wantAdmit])
			}
			queued := 0
			for _, r := range nodes.reads {
				if strings.HasPrefix(r, "allocs node-q") {
					queued++
				}
			}
			t.Logf("%d reads: %v", len(nodes.reads), nodes.reads)
			if tt.maxQueued >= 0 && queued > tt.maxQueued {
				t.Errorf("the allocations of %d queued hosts' nodes read, want at most %d", queued, tt.maxQueued)
			}
		})
	}
}

// TestCapacityGateSkipsNodesEmptiedByTheirDrain: the allocations of a node out
// whose drain rollboot saw complete are not read while it stays ineligible and
// not draining (nothing on it moves); any other node out is read, and what it
// runs counts.
func TestCapacityGateSkipsNodesEmptiedByTheirDrain(t *testing.T) {
	tests := []struct {
		name      string
		phase     string
		node      func(*phase.NodeView)
		drainOn   bool // the node list shows it draining
		wantRead  bool
		wantAdmit bool
	}{
		{name: "rebooting, ineligible", phase: store.PhaseRebooting, node: ineligibleNode, wantAdmit: true},
		{name: "drained, ineligible", phase: store.PhaseDrained, node: ineligibleNode, wantAdmit: true},
		{name: "still draining", phase: store.PhaseDraining, node: ineligibleNode, drainOn: true, wantRead: true},
		{name: "drain complete, plan still draining", phase: store.PhaseDraining, node: ineligibleNode, wantRead: true},
		{name: "rebooting, made eligible since", phase: store.PhaseRebooting, wantRead: true},
		{name: "rebooting, drained again", phase: store.PhaseRebooting, node: ineligibleNode, drainOn: true, wantRead: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts := []testHost{
				{name: "b0"}, // the one candidate: 7 GiB free
				{name: "out", phase: tt.phase, node: tt.node},
				{name: "q", phase: store.PhasePending},
			}
			s := admitSnapshot(hosts, func(s *snapshot) {
				for _, n := range s.nodes {
					n.NodePool = "default"
				}
				s.nodes["node-out"].Drain = tt.drainOn
			})
			// What the node out runs does not fit beside q's on b0.
			nodes := &capNodes{allocs: map[string][]*api.Allocation{
				"node-out": {capAlloc("out.web[0]", "service", 5000)},
				"node-q":   {capAlloc("q.web[0]", "service", 4000)},
			}}
			c := capacityCoordinator(nodes, 2)
			c.admit(context.Background(), s)
			if s.capacity.Gate.Err != nil {
				t.Fatal(s.capacity.Gate.Err)
			}
			adm := admitSnap(c.admitRules(), s)
			if got := slices.Contains(nodes.reads, "allocs node-out"); got != tt.wantRead {
				t.Errorf("node out read: %t, want %t (reads %v)", got, tt.wantRead, nodes.reads)
			}
			if adm.Admitted["q"] != tt.wantAdmit {
				t.Errorf("q admitted: %t, want %t (it waits: %v)", adm.Admitted["q"], tt.wantAdmit, adm.Wait["q"])
			}
		})
	}
}

func ineligibleNode(n *phase.NodeView) { n.Eligible = false }

// The candidate nodes a round of the capacity gate needs are read side by
// side: a new leader knows none of them.
func TestCapacityGateReadsCandidatesSideBySide(t *testing.T) {
	hosts := []testHost{{name: "q", phase: store.PhasePending}}
	for i := range 16 {
		hosts = append(hosts, testHost{name: fmt.Sprintf("b%02d", i)})
	}
	s := admitSnapshot(hosts, inDefaultPool)
	// Fits nowhere: every node is read, in rounds of 2, 4, 8 and 16, then 17.
	nodes := &capNodes{allocs: map[string][]*api.Allocation{"node-q": {capAlloc("q.web[0]", "service", 16384)}},
		infoTakes: 5 * time.Millisecond}
	c := capacityCoordinator(nodes, 1)
	c.admit(context.Background(), s)
	if s.capacity.Gate.Err != nil {
		t.Fatal(s.capacity.Gate.Err)
	}
	infos := 0
	for _, r := range nodes.reads {
		if strings.HasPrefix(r, "info ") {
			infos++
		}
	}
	if infos != 17 || nodes.mostInInfo < 2 || nodes.mostInInfo > capacityread.Parallelism {
		t.Errorf("%d node reads, at most %d at once; want 17 (q's own node is one), 2 to %d at once", infos, nodes.mostInInfo, capacityread.Parallelism)
	}
	if adm := admitSnap(c.admitRules(), s); adm.Admitted["q"] || adm.Wait["q"].Kind != phase.WaitCapacity {
		t.Errorf("q admitted %t, waits %v; want held for capacity", adm.Admitted["q"], adm.Wait["q"])
	}
}

// inDefaultPool puts every node of s in the default node pool.
func inDefaultPool(s *snapshot) {
	for _, n := range s.nodes {
		n.NodePool = "default"
	}
}

// capacityCoordinator is a coordinator with the capacity gate on, reading
// nodes, its default group taking concurrency hosts at once.
func capacityCoordinator(nodes NodesAPI, concurrency int) *Coordinator {
	return New(Options{
		Deps: Deps{Nodes: nodes},
		Rules: rules.Rules{
			Capacity:     rules.CapacityGate{Enabled: true},
			DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: concurrency},
		},
	})
}

// A host the gate held for room, after reading all it could, keeps its hold
// from pass to pass without a read while the nodes it depends on are laid out
// the same; the gate reads again when its recheck is due, or when a node
// joins or leaves the candidates.
func TestCapacityHoldKeptWithoutReads(t *testing.T) {
	hosts := []testHost{{name: "a", phase: store.PhasePending}}
	allocs := map[string][]*api.Allocation{"node-a": {capAlloc("web.web[0]", "service", 4096)}}
	for _, n := range []string{"c", "d", "e"} {
		hosts = append(hosts, testHost{name: n})
		allocs["node-"+n] = []*api.Allocation{capAlloc("x."+n+"[0]", "service", 5120)}
	}
	nodes := &capNodes{allocs: allocs}
	c := capacityCoordinator(nodes, 1)
	pass := func(after time.Duration, mod func(*snapshot)) (string, int) {
		t.Helper()
		s := admitSnapshot(hosts, func(s *snapshot) {
			inDefaultPool(s)
			if mod != nil {
				mod(s)
			}
		})
		s.now = t0.Add(after)
		nodes.mu.Lock()
		nodes.reads = nil
		nodes.mu.Unlock()
		c.allocs.NewPass(nil) // as a pass starts (takeMail): an earlier pass's reads are not its own
		adm := c.admit(context.Background(), s)
		if adm.Admitted["a"] {
			t.Fatalf("a admitted at +%s: no room was made", after)
		}
		return adm.Wait["a"].String(), len(nodes.reads)
	}
	first, reads := pass(0, nil)
	if reads == 0 || !strings.Contains(first, "no node has that much free") {
		t.Fatalf("first pass: %q after %d reads, want a hold for room after reading", first, reads)
	}
	if why, reads := pass(time.Second, nil); reads != 0 || why != first {
		t.Errorf("the next pass, nothing changed: %q after %d reads, want %q and none", why, reads, first)
	}
	ineligible := func(s *snapshot) { s.nodes["node-e"].SchedulingEligibility = "ineligible" }
	if why, reads := pass(2*time.Second, ineligible); reads == 0 || why == "" {
		t.Errorf("a candidate left: %q after %d reads, want the gate to read again", why, reads)
	}
	if _, reads := pass(3*time.Second, ineligible); reads != 0 {
		t.Errorf("the hold decided on the new layout: %d reads, want none", reads)
	}
	if _, reads := pass(3*time.Second+admission.CapacityRecheck, ineligible); reads == 0 {
		t.Error("the recheck is due: no read, want the gate to read again")
	}
}

// pairNodes answers the allocation reads of two nodes only once both have
// begun: read one after the other, the first waits for the second in vain.
type pairNodes struct {
	*capNodes
	probes map[string]*overlapProbe // by node ID: begun by its own read
}

func (n *pairNodes) Allocations(id string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	if p, ok := n.probes[id]; ok {
		p.begin()
		for other, o := range n.probes {
			if other != id {
				o.wait()
			}
		}
	}
	return n.capNodes.Allocations(id, q)
}

// The system jobs on the nodes of the hosts admitted together are read side
// by side: one round trip for the hand-out, not one per host.
func TestGrantJobsReadSideBySide(t *testing.T) {
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending}}, nil)
	nodes := &pairNodes{capNodes: &capNodes{}, probes: map[string]*overlapProbe{"node-a": newOverlapProbe(), "node-b": newOverlapProbe()}}
	c := New(Options{Deps: Deps{Nodes: nodes},
		Rules: rules.Rules{DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2}}})
	if adm := c.admit(context.Background(), s); !adm.Admitted["a"] || !adm.Admitted["b"] {
		t.Fatalf("admitted %v, want a and b", adm.Admitted)
	}
	for id, p := range nodes.probes {
		if !p.overlap.Load() {
			t.Errorf("the read of %s's allocations did not overlap the other's (reads %v)", id, nodes.reads)
		}
	}
}

// The allocations of the rejoining hosts' nodes are read side by side: a pass
// with several hosts back waits one round trip for them, not one per host.
func TestRejoinHealthReadSideBySide(t *testing.T) {
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhaseRejoining}, {name: "b", phase: store.PhaseRejoining}}, nil)
	nodes := &pairNodes{capNodes: &capNodes{}, probes: map[string]*overlapProbe{"node-a": newOverlapProbe(), "node-b": newOverlapProbe()}}
	c := New(Options{Deps: Deps{Nodes: nodes}, Rules: rules.Rules{DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2}}})
	c.readRejoinHealth(context.Background(), s)
	if len(s.health) != 2 {
		t.Fatalf("health read for %d hosts, want 2", len(s.health))
	}
	for id, p := range nodes.probes {
		if !p.overlap.Load() {
			t.Errorf("the read of %s's allocations did not overlap the other's (reads %v)", id, nodes.reads)
		}
	}
}

// pairClusters reads a cluster's health only once the probes' other reads
// have begun too (pairNodes).
type pairClusters struct{ probes map[string]*overlapProbe }

func (p pairClusters) Read(context.Context, string, string) health.ClusterHealth {
	p.probes["cluster"].begin()
	for id, o := range p.probes {
		if id != "cluster" {
			o.wait()
		}
	}
	return health.ClusterHealth{}
}

func (pairClusters) HandOver(context.Context, string, string) error { return nil }

// A pass reads the server clusters' health beside its node reads (a rejoining
// host's allocations here): one round trip, not two.
func TestClustersReadBesideTheNodes(t *testing.T) {
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhaseRejoining},
		{name: "srv", phase: store.PhaseRejoining, rec: nomadServer("srv")}}, nil)
	probes := map[string]*overlapProbe{"node-a": newOverlapProbe(), "cluster": newOverlapProbe()}
	c := New(Options{Deps: Deps{Nodes: &pairNodes{capNodes: &capNodes{}, probes: probes}, Clusters: pairClusters{probes}},
		Rules: rules.Rules{DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 1}}})
	c.readDetails(context.Background(), s)
	if len(s.health) != 2 || len(s.clusters) != 1 {
		t.Fatalf("health read for %d hosts, %d clusters: want 2 and 1", len(s.health), len(s.clusters))
	}
	for id, p := range probes {
		if !p.overlap.Load() {
			t.Errorf("the %s read did not overlap the other", id)
		}
	}
}

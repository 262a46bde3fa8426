package coordinator

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// t0 is the time the tests decide at.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

var errInjected = errors.New("injected failure")

// overlapProbe tells whether one call was made while another was under way:
// the waiting call waits (at most two seconds) for the other to begin.
type overlapProbe struct {
	begun   chan struct{}
	once    sync.Once
	overlap atomic.Bool
}

func newOverlapProbe() *overlapProbe { return &overlapProbe{begun: make(chan struct{})} }

// begin marks the call waited for as begun.
func (p *overlapProbe) begin() { p.once.Do(func() { close(p.begun) }) }

// wait waits for that call to begin, and notes whether it did in time.
func (p *overlapProbe) wait() {
	select {
	case <-p.begun:
		p.overlap.Store(true)
	case <-time.After(2 * time.Second):
	}
}

// callLog records every write the coordinator makes, to Nomad nodes, to the
// variables and to the server clusters, in order, and fails the failAt-th one
// (1-based; 0: none).
type callLog struct {
	mu     sync.Mutex
	calls  []string
	failAt int
	// failOn, when set, fails the next call of that name, once.
	failOn string
}

func (l *callLog) do(call string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
	if len(l.calls) == l.failAt {
		return errInjected
	}
	if l.failOn != "" && call == l.failOn {
		l.failOn = ""
		return errInjected
	}
	return nil
}

func (l *callLog) reset(failAt int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls, l.failAt = nil, failAt
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// memVars is an in-memory Nomad Variables API with check-and-set; its writes go
// to log as "put <path>" and "delete <path>" (the path without the prefix).
type memVars struct {
	log  *callLog
	mu   sync.Mutex
	idx  uint64
	vars map[string]api.Variable
}

func newMemVars(log *callLog) *memVars { return &memVars{log: log, vars: map[string]api.Variable{}} }

func (m *memVars) name(path string) string {
	path = strings.TrimPrefix(path, "rollboot/")
	if strings.HasPrefix(path, "history/") {
		return "history"
	}
	return path
}

func (m *memVars) Read(path string, _ *api.QueryOptions) (*api.Variable, *api.QueryMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vars[path]
	if !ok {
		return nil, &api.QueryMeta{LastIndex: m.idx}, api.ErrVariablePathNotFound
	}
	return &v, &api.QueryMeta{LastIndex: m.idx}, nil
}

func (m *memVars) PrefixList(prefix string, _ *api.QueryOptions) ([]*api.VariableMetadata, *api.QueryMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*api.VariableMetadata
	for p, v := range m.vars {
		if strings.HasPrefix(p, prefix) {
			out = append(out, &api.VariableMetadata{Path: p, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, &api.QueryMeta{LastIndex: m.idx}, nil
}

func (m *memVars) CheckedCreate(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return m.put(v, true)
}

func (m *memVars) CheckedUpdate(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return m.put(v, false)
}

func (m *memVars) put(v *api.Variable, create bool) (*api.Variable, *api.WriteMeta, error) {
	if err := m.log.do("put " + m.name(v.Path)); err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.vars[v.Path]
	if (create && ok) || (!create && (!ok || cur.ModifyIndex != v.ModifyIndex)) {
		return nil, nil, api.ErrCASConflict{CheckIndex: v.ModifyIndex, Conflict: &cur}
	}
	m.idx++
	n := *v
	n.ModifyIndex = m.idx
	if !ok {
		n.CreateIndex = m.idx
	}
	m.vars[v.Path] = n
	return &n, &api.WriteMeta{LastIndex: m.idx}, nil
}

func (m *memVars) CheckedDelete(path string, checkIndex uint64, _ *api.WriteOptions) (*api.WriteMeta, error) {
	if err := m.log.do("delete " + m.name(path)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.vars[path]
	if !ok || cur.ModifyIndex != checkIndex {
		return nil, api.ErrCASConflict{CheckIndex: checkIndex, Conflict: &cur}
	}
	m.idx++
	delete(m.vars, path)
	return &api.WriteMeta{LastIndex: m.idx}, nil
}

// recNodes is a NodesAPI whose writes go to log: "drain <node>", "cancel drain
// <node> (eligible)", "eligible <node>". It lists nodes (ignoring filters), and
// every node runs no allocation and has no event.
type recNodes struct {
	log      *callLog
	nodes    []*api.NodeListStub
	failInfo string // Info of this node fails
}

func (n recNodes) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return n.nodes, &api.QueryMeta{LastIndex: 1}, nil
}

func (n recNodes) Info(id string, _ *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	if id == n.failInfo {
		return nil, nil, errInjected
	}
	return &api.Node{ID: id}, &api.QueryMeta{LastIndex: 1}, nil
}

func (n recNodes) Allocations(string, *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{LastIndex: 1}, nil
}

func (n recNodes) UpdateDrainOpts(id string, opts *api.DrainOptions, _ *api.WriteOptions) (*api.NodeDrainUpdateResponse, error) {
	call := "drain " + id
	if opts.DrainSpec == nil {
		call = "cancel drain " + id
		if opts.MarkEligible {
			call += " (eligible)"
		}
	}
	if err := n.log.do(call); err != nil {
		return nil, err
	}
	return &api.NodeDrainUpdateResponse{}, nil
}

func (n recNodes) ToggleEligibility(id string, eligible bool, _ *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error) {
	op := "eligible "
	if !eligible {
		op = "ineligible " // a cordon of a host next in line (phase/cordon.go)
	}
	if err := n.log.do(op + id); err != nil {
		return nil, err
	}
	return &api.NodeEligibilityUpdateResponse{}, nil
}

// recClusters records leadership hand-overs as "hand over <product>" (failing
// them with handOverErr), and counts the health reads by product/cluster.
type recClusters struct {
	log         *callLog
	health      map[string]health.ClusterHealth
	handOverErr error

	mu    sync.Mutex
	reads map[string]int
}

func (c *recClusters) Read(_ context.Context, product, cluster string) health.ClusterHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[product+"/"+cluster]++
	if h, ok := c.health[product+"/"+cluster]; ok {
		return h
	}
	return health.ClusterHealth{Product: health.Product(product), Cluster: cluster, Err: errors.New("unknown cluster")}
}

func (c *recClusters) HandOver(_ context.Context, product, _ string) error {
	if err := c.log.do("hand over " + product); err != nil {
		return err
	}
	return c.handOverErr
}

// simStore starts an emulated cluster with cfg, a client of it and rollboot's
// store on it, all closed when the test ends.
func simStore(t *testing.T, cfg nomadsim.Config) (*nomadsim.Sim, *api.Client, *store.Store) {
	t.Helper()
	return simStoreVia(t, cfg, nil)
}

// countRequests counts the requests that match, and sends every request on.
type countRequests struct {
	match func(*http.Request) bool
	n     atomic.Int64
}

// expect checks that want requests were counted since the last check (what:
// the step they were counted for), and counts anew.
func (c *countRequests) expect(t *testing.T, want int64, what string) {
	t.Helper()
	if got := c.n.Swap(0); got != want {
		t.Fatalf("%s: %d requests counted, want %d", what, got, want)
	}
}

func (c *countRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.match(r) {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// simStoreVia is simStore with the client's requests going through rt (nil:
// the default transport), which may count them.
func simStoreVia(t *testing.T, cfg nomadsim.Config, rt http.RoundTripper) (*nomadsim.Sim, *api.Client, *store.Store) {
	t.Helper()
	sim, client := simtest.Start(t, cfg, rt)
	return sim, client, store.New(client.Variables(), "rollboot", "")
}

// Fixtures of the phase machine's inputs, as package phase's tests build them.

func host(boot string, required bool) *store.HostRecord {
	return &store.HostRecord{Host: "h1", NodeID: "n1", BootID: boot, RebootRequired: required,
		Reason: "sentinel", RequestedAt: t0.Add(-time.Hour)}
}

func node(mod func(*phase.NodeView)) *phase.NodeView {
	n := &phase.NodeView{ID: "n1", Status: "ready", Eligible: true}
	if mod != nil {
		mod(n)
	}
	return n
}

func plan(ph string, mod func(*store.Plan)) store.Plan {
	p := store.Plan{Host: "h1", Phase: ph, PhaseSince: t0.Add(-time.Minute), GrantID: "g1",
		BootIDAtGrant: "b1", NodeID: "n1", EligibleBefore: true, Attempt: 1, Group: "web",
		RequestedAt: t0.Add(-time.Hour),
		Timeline:    map[string]time.Time{store.PhasePending: t0.Add(-time.Hour), ph: t0.Add(-time.Minute)}}
	if ph == store.PhaseIdle {
		p.GrantID, p.BootIDAtGrant, p.Attempt, p.EligibleBefore = "", "", 0, false
	}
	switch ph {
	case store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining, store.PhaseStuck:
		if _, ok := p.Timeline[store.PhaseDrained]; !ok {
			p.Timeline[store.PhaseDrained] = t0.Add(-2 * time.Minute)
		}
	}
	if mod != nil {
		mod(&p)
	}
	return p
}

var timing = phase.Timing{
	DrainDeadline:   10 * time.Minute,
	RetryBackoff:    time.Minute,
	RetryMaxBackoff: 8 * time.Minute,
	RejoinTimeout:   30 * time.Minute,
	LoopBackoff:     time.Hour,
	LoopMaxBackoff:  24 * time.Hour,
}

func failedHost(boot, grant string) *store.HostRecord {
	h := host(boot, true)
	h.RebootingGrant = "g1"
	h.Failure = &store.RebootFailure{Grant: grant, Step: store.StepPreHook, ExitStatus: 3, Message: "check-disk: disk full", At: t0}
	return h
}

func drainedNode(n *phase.NodeView) {
	n.Eligible, n.DrainStatus, n.DrainGrant = false, "complete", "g1"
}

// restartedNode is node(mod) whose client started again after the drain.
func restartedNode(mod func(*phase.NodeView)) *phase.NodeView {
	n := node(mod)
	clientRestart(n)
	return n
}

// clientRestarted marks the node's Nomad client as started again after the
// drain of plan: the sign from Nomad that a new boot ID needs.
func clientRestart(n *phase.NodeView) { n.ClientStartedAt = t0.Add(-time.Second) }

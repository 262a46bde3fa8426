package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/workload"
	"github.com/rollboot/rollboot/internal/workloadread"
)

// The alert gate and the health gates are read by package gatepoll, when
// admission asks for them (a host waits to start).

// readAlerts reads the alerts into the snapshot, once per snapshot.
func (c *Coordinator) readAlerts(ctx context.Context, s *snapshot) {
	if s.alerts == nil {
		v := c.alerts.Read(ctx, c.opt.Alerts, s.now)
		s.alerts = &v
	}
}

// readHealthGates reads and decides every gate into the snapshot, once per
// snapshot.
func (c *Coordinator) readHealthGates(ctx context.Context, s *snapshot) {
	if s.healthGates == nil {
		s.healthGates = c.gates.Read(ctx, c.opt.HealthGates)
	}
}

// The workload blockers (policy block workloads, package workload): a node that
// runs allocations of a blocking job is not drained, and no drain starts in a
// node pool while a deployment of one of its jobs is in progress or failed, or
// while evaluations of its jobs are blocked. They hold hosts before admission
// offers any slot, as settling does: a held host takes no slot, and hosts of
// other pools still go. Package workloadread reads what they decide on, when
// admission asks.

// WorkloadSettings are the policy's workloads block.
type WorkloadSettings = workload.Settings

// workloadView is what a pass read for the workload blockers: why each host
// read for is held (zero: it is not).
type workloadView struct {
	holds map[string]phase.WaitReason
}

// hostPool is the node pool of a host's node ("" without a known node).
func hostPool(s *snapshot, hv *hostView) string {
	if hv.node == nil {
		return ""
	}
	if n := s.nodes[hv.node.ID]; n != nil {
		return n.NodePool
	}
	return ""
}

// readWorkloads reads what the workload blockers need to decide on hosts
// (queued hosts with a node), and why each is held.
func (c *Coordinator) readWorkloads(ctx context.Context, s *snapshot, names []string) {
	hosts := make([]workloadread.Host, 0, len(names))
	for _, name := range names {
		hv := s.hosts[name]
		h := workloadread.Host{Name: name, NodeID: hv.node.ID, Pool: hostPool(s, hv)}
		if c.groupOptions(hv.group).HoldSingletons {
			h.Singletons, h.ApprovedUntil = true, s.control.Approvals[name].Until
		}
		hosts = append(hosts, h)
	}
	r := workloadread.Reader{API: c.opt.WorkloadsAPI, Nodes: c.opt.Nodes, Settings: c.opt.Workloads,
		Now: func() time.Time { return s.now }}
	s.workloads = &workloadView{holds: r.Holds(ctx, hosts)}
}

// holdsSingletons reports whether some group holds its singletons
// (singletons = "hold"): the workload blockers then read for it.
func (c *Coordinator) holdsSingletons() bool {
	if c.opt.DefaultOptions.HoldSingletons {
		return true
	}
	for _, g := range c.opt.Groups {
		if g.Options.HoldSingletons {
			return true
		}
	}
	return false
}

// The capacity gate: a host is admitted only if the allocations its drain would
// move fit on the other nodes, together with those of the nodes already out
// (draining, or out of service for rollboot) and of the hosts admitted before it
// in the same pass, which offer no room either (package capacity decides).
//
// Reading every node and allocation each pass would cost too much on a large
// cluster, so the observation is lazy and driven by admission itself: only when
// some host is queued, observe runs admission (pure, cheap) with what it has
// read; the gate notes what it lacks (the allocations of a node whose drain
// would move them, more candidate nodes of a pool when those read so far do not
// suffice), observe reads that and runs admission again, until the gate lacks
// nothing. The candidate nodes of a pool are read in a fixed order, twice as many
// each round, so a check usually reads the host's node and one or two others.
// Each node's resources are kept from pass to pass while its ModifyIndex stays
// the same (capacityNodes); its allocations are read again in each pass that
// needs them.

// CapacityGate configures the capacity gate (the policy's capacity block).
type CapacityGate struct {
	Enabled bool
	// Headroom is the share of each node's capacity kept free, in [0, 1).
	Headroom float64
}

// capacityView is what the capacity gate read in a pass: what admission sees
// of it (gate), and the allocations read, by node ID.
type capacityView struct {
	gate   admission.Capacity
	allocs map[string][]*api.Allocation
	// kept: the movers of draining nodes taken as kept (movercache.go), not
	// read in this pass.
	kept map[string][]capacity.Alloc
}

// readCapacity reads what the capacity gate lacks (needs), into the pass's
// view of it, made at its first read.
func (c *Coordinator) readCapacity(ctx context.Context, s *snapshot, needs admission.CapacityNeeds) {
	v := s.capacity
	if v == nil {
		v = newCapacityView(s, c.opt.Capacity.Headroom)
		s.capacity = v
		c.capacityCache.prune(s.nodes)
		c.moverCache.retain(func(id string) bool { return keepsMovers(s.nodes[id]) })
	}
	if v.gate.Err == nil {
		v.gate.Err = c.capacityRound(ctx, s, v, needs)
	}
}

// newCapacityView sorts the nodes into the candidates of each pool and the
// nodes out.
func newCapacityView(s *snapshot, headroom float64) *capacityView {
	v := &capacityView{allocs: map[string][]*api.Allocation{}, gate: admission.Capacity{Headroom: headroom,
		Movers: map[string][]capacity.Alloc{}, Nodes: map[string]capacity.Node{}, Read: map[string]int{}, GroupOf: s.groupOf}}
	// A host on its way out whose drain the node list does not show yet counts
	// as draining. A rejoining one does not: eligible again, it takes
	// allocations, which will not move.
	var leaving []string
	for _, name := range busyNames(s) {
		switch phase := s.plans[name].Phase; phase {
		case store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting:
			hv := s.hosts[name]
			if hv.node == nil {
				continue
			}
			leaving = append(leaving, hv.node.ID)
			if phase != store.PhaseDraining && capacity.EmptiedByDrain(s.nodes[hv.node.ID]) {
				if v.gate.Emptied == nil {
					v.gate.Emptied = map[string]bool{}
				}
				v.gate.Emptied[hv.node.ID] = true
			}
		}
	}
	slices.Sort(leaving)
	v.gate.Candidates, v.gate.Out = capacity.SortNodes(s.nodes, slices.Compact(leaving))
	return v
}

// capacityRound reads what the gate lacked: the allocations of the nodes whose
// allocations would move, and twice as many candidates of the pools short of
// room.
func (c *Coordinator) capacityRound(ctx context.Context, s *snapshot, v *capacityView, needs admission.CapacityNeeds) error {
	var todo []string // the candidates this round reads, each once
	for _, id := range candidatesToRead(&v.gate, needs.Pools) {
		if !slices.Contains(todo, id) {
			todo = append(todo, id)
		}
	}
	// The allocations and the nodes' details are read side by side: each
	// read waits its turn behind the others on a busy server, and the first
	// hand-out of a rollout waits for them while every agent writes its record.
	var (
		nodes            []capacity.Node
		allocErr, nodErr error
		wg               sync.WaitGroup
	)
	wg.Go(func() { allocErr = c.readAllocsOf(ctx, s, v, append(slices.Clone(needs.Allocs), todo...)) }) // admitreads.go
	wg.Go(func() { nodes, nodErr = c.capacityNodes(ctx, s, todo) })
	wg.Wait()
	if err := cmp.Or(allocErr, nodErr); err != nil {
		return err
	}
	for i, id := range todo {
		n := nodes[i]
		allocs, err := c.capacityAllocs(ctx, v, id) // read above (readAllocsOf)
		if err != nil {
			return err
		}
		n.Used, n.Running = capacity.Used(allocs), capacity.Running(allocs)
		v.gate.Nodes[id] = n
	}
	for _, pool := range needs.Pools {
		v.gate.Read[pool] = v.gate.NextRead(pool)
	}
	return nil
}

// capacityNodes returns the capacity of the nodes ids: as kept at their
// ModifyIndex, the others read side by side (readCapacityNode): a new leader
// knows none, and one after the other they took most of a second on a loaded
// machine before the first grant of a rollout. The capacity is kept from pass
// to pass in a perIndex, which only this runs on (capacityRound waits for it).
func (c *Coordinator) capacityNodes(ctx context.Context, s *snapshot, ids []string) ([]capacity.Node, error) {
	out := make([]capacity.Node, len(ids))
	var todo []int
	for i, id := range ids {
		if n, ok := c.capacityCache.get(id, s.nodes[id].ModifyIndex); ok {
			out[i] = n
			continue
		}
		todo = append(todo, i)
	}
	// After a failure no more is read: the pass holds every queued host with it.
	read, err := parallel.Map(len(todo), CapacityReadParallelism, func(k int) (capacity.Node, error) {
		return c.readCapacityNode(ctx, ids[todo[k]])
	})
	if err != nil {
		return nil, err
	}
	for k, i := range todo {
		out[i] = read[k]
		c.capacityCache.put(ids[i], s.nodes[ids[i]].ModifyIndex, read[k])
	}
	return out, nil
}

// capacityAllocs returns the allocations on a node, read once per pass.
func (c *Coordinator) capacityAllocs(ctx context.Context, v *capacityView, nodeID string) ([]*api.Allocation, error) {
	if allocs, ok := v.allocs[nodeID]; ok {
		return allocs, nil
	}
	allocs, meta, err := c.opt.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read the allocations of node %s: %w", nodeID, err)
	}
	c.noteAllocRead(nodeID, meta, allocs)
	v.allocs[nodeID] = allocs
	return allocs, nil
}

// readCapacityNode reads a node and returns its capacity: its resources less
// its reserved resources, its healthy devices, and what constraints
// interpolate on it (capacity.NodeOf).
func (c *Coordinator) readCapacityNode(ctx context.Context, id string) (capacity.Node, error) {
	n, _, err := c.opt.Nodes.Info(id, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return capacity.Node{}, fmt.Errorf("read node %s: %w", id, err)
	}
	return capacity.NodeOf(n), nil
}

// CapacityReadParallelism bounds the allocation reads of one round of the
// capacity gate sent at once, and the node reads sent beside them. A check
// counts the allocations of every node on its way out (each draining or
// rebooting host of the rollout), read again in each pass that checks, all of
// it between a slot being freed and the next drain: one after the other they
// add a round trip each (docs/performance.md, "How each figure is measured").
// Like PlanWriteParallelism, the bound keeps the burst on the Nomad servers
// small.
const CapacityReadParallelism = 8

// readAllocsOf reads, side by side, the allocations of the nodes ids whose
// allocations this pass has not read yet, into v (capacityAllocs, at once;
// an ID given twice is read once). A draining node's movers kept since an
// earlier pass are taken instead (movercache.go).
func (c *Coordinator) readAllocsOf(ctx context.Context, s *snapshot, v *capacityView, ids []string) error {
	var todo []string
	for _, id := range ids {
		if _, ok := v.allocs[id]; ok || slices.Contains(todo, id) {
			continue
		}
		if _, ok := v.kept[id]; ok {
			continue
		}
		if movers, ok := c.keptMovers(s.nodes, id); ok {
			if v.kept == nil {
				v.kept = map[string][]capacity.Alloc{}
			}
			v.kept[id] = movers
			continue
		}
		todo = append(todo, id)
	}
	// After a failure no more is read: the pass holds every queued host with it.
	got, err := parallel.Map(len(todo), CapacityReadParallelism, func(i int) ([]*api.Allocation, error) {
		allocs, meta, err := c.opt.Nodes.Allocations(todo[i], (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("read the allocations of node %s: %w", todo[i], err)
		}
		c.noteAllocRead(todo[i], meta, allocs) // as capacityAllocs: a watch starts from it
		return allocs, nil
	})
	if err != nil {
		return err
	}
	for i, id := range todo {
		v.allocs[id] = got[i]
		v.gate.Movers[id] = capacity.Movers(got[i])
		c.keepMovers(s.nodes, id, v.gate.Movers[id])
	}
	for id, movers := range v.kept { // again at each round: it may have read replacements
		v.gate.Movers[id] = withoutReplaced(movers, v.allocs)
	}
	return nil
}

// candidatesToRead returns the candidates of pools whose allocations and
// details this round reads (capacityRound): those up to the next read of
// each pool (NextRead) not read yet.
func candidatesToRead(v *admission.Capacity, pools []string) []string {
	var ids []string
	for _, pool := range pools {
		for _, id := range v.Candidates[pool][:v.NextRead(pool)] {
			if _, ok := v.Nodes[id]; !ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

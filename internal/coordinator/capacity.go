package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/constraint"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/store"
)

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
}

// readCapacity reads what the capacity gate lacks (needs), into the pass's
// view of it, made at its first read.
func (c *Coordinator) readCapacity(ctx context.Context, s *snapshot, needs admission.CapacityNeeds) {
	v := s.capacity
	if v == nil {
		v = newCapacityView(s, c.opt.Capacity.Headroom)
		s.capacity = v
		c.capacityCache.prune(s.nodes)
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
			if phase != store.PhaseDraining && emptiedByDrain(s.nodes[hv.node.ID]) {
				if v.gate.Emptied == nil {
					v.gate.Emptied = map[string]bool{}
				}
				v.gate.Emptied[hv.node.ID] = true
			}
		}
	}
	slices.Sort(leaving)
	v.gate.Candidates, v.gate.Out = sortNodes(s.nodes, slices.Compact(leaving))
	return v
}

// eligibleReady reports whether n is ready and eligible: a candidate, unless
// it drains or is on its way out.
func eligibleReady(n *api.NodeListStub) bool {
	return n.Status == api.NodeStatusReady && n.SchedulingEligibility == api.NodeSchedulingEligible
}

// emptiedByDrain reports whether nothing on a node whose drain rollboot saw
// complete (its plan drained or rebooting) can move. Nomad marks a drain
// complete only when every allocation but those of system jobs has stopped on
// its client and none it drains is left that is not terminal
// (nomad/drainer/draining_node.go IsDone, RemainingAllocs); what it leaves,
// system allocations, never moves (moves). Still ineligible and not draining
// again, the node is given nothing new that would. A node an operator made
// eligible or drains again since is read like any other node out.
func emptiedByDrain(n *api.NodeListStub) bool {
	return n != nil && !n.Drain && n.SchedulingEligibility == api.NodeSchedulingIneligible
}

// sortNodes sorts nodes, by ID, into the candidates of each pool ("all": every
// candidate) and the nodes out: draining, or on their way out (leaving, sorted).
func sortNodes(nodes map[string]*api.NodeListStub, leaving []string) (candidates map[string][]string, out []string) {
	candidates = map[string][]string{}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		n := nodes[id]
		_, leaves := slices.BinarySearch(leaving, id)
		switch {
		case n.Drain || leaves:
			out = append(out, id)
		case eligibleReady(n):
			candidates[n.NodePool] = append(candidates[n.NodePool], id)
			candidates["all"] = append(candidates["all"], id)
		}
	}
	return candidates, out
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
	wg.Go(func() { allocErr = c.readAllocsOf(ctx, v, append(slices.Clone(needs.Allocs), todo...)) }) // capacityread.go
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
		for _, a := range allocs {
			if !allocGone(a) {
				n.Used = n.Used.Add(allocAsk(a))
			}
		}
		n.Running = running(allocs)
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

// readCapacityNode reads a node's capacity: its resources less its reserved
// resources (nomad/structs/funcs.go AllocsFit compares the allocations with
// NodeResources.Comparable less ReservedResources.Comparable), and its
// healthy device instances; and what constraints interpolate on it (a change
// to its attributes or meta bumps its ModifyIndex too).
func (c *Coordinator) readCapacityNode(ctx context.Context, id string) (capacity.Node, error) {
	n, _, err := c.opt.Nodes.Info(id, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return capacity.Node{}, fmt.Errorf("read node %s: %w", id, err)
	}
	out := capacity.Node{Name: n.Name, Pool: n.NodePool, Datacenter: n.Datacenter, Targets: constraint.NodeOf(n)}
	if r := n.NodeResources; r != nil {
		out.Capacity = capacity.Resources{CPU: r.Cpu.CpuShares, MemoryMB: r.Memory.MemoryMB}
		for _, d := range r.Devices {
			for _, inst := range d.Instances {
				if inst.Healthy {
					if out.Capacity.Devices == nil {
						out.Capacity.Devices = map[string]int{}
					}
					out.Capacity.Devices[d.Vendor+"/"+d.Type+"/"+d.Name]++
				}
			}
		}
	}
	if r := n.ReservedResources; r != nil {
		out.Capacity.CPU -= int64(r.Cpu.CpuShares)
		out.Capacity.MemoryMB -= int64(r.Memory.MemoryMB)
	}
	return out, nil
}

// allocGone reports whether an allocation uses no room: its client stopped it
// (structs.Allocation.ClientTerminalStatus: AllocsFit and the scheduler's
// proposed allocations, scheduler/feasible/context.go ProposedAllocs, count one
// the scheduler stopped until its client reports it stopped).
func allocGone(a *api.Allocation) bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// moves reports whether a drain moves the allocation: meant to run, not stopped
// by its client, and not of a system or sysbatch job (they stay on their node
// until it is drained). One being stopped already has its replacement.
func moves(a *api.Allocation) bool {
	if allocGone(a) || a.DesiredStatus != api.AllocDesiredStatusRun {
		return false
	}
	if a.Job != nil && a.Job.Type != nil && (*a.Job.Type == api.JobTypeSystem || *a.Job.Type == api.JobTypeSysbatch) {
		return false
	}
	return true
}

// allocAsk is what an allocation uses: the sum of its tasks' CPU, memory and
// device instances.
func allocAsk(a *api.Allocation) capacity.Resources {
	var r capacity.Resources
	if a.AllocatedResources == nil {
		return r
	}
	for _, t := range a.AllocatedResources.Tasks {
		if t == nil {
			continue
		}
		r.CPU += t.Cpu.CpuShares
		r.MemoryMB += t.Memory.MemoryMB
		for _, d := range t.Devices {
			if r.Devices == nil {
				r.Devices = map[string]int{}
			}
			r.Devices[d.Vendor+"/"+d.Type+"/"+d.Name] += len(d.DeviceIDs)
		}
	}
	return r
}

// movers are the allocations of a node that its drain moves.
func movers(allocs []*api.Allocation) []capacity.Alloc {
	var out []capacity.Alloc
	for _, a := range allocs {
		if !moves(a) {
			continue
		}
		m := capacity.Alloc{Name: a.Name, Job: a.JobID, Namespace: a.Namespace, Group: a.TaskGroup, Ask: allocAsk(a),
			Constraints: constraint.OfGroup(a.Job, a.TaskGroup), Distinct: constraint.DistinctOf(a.Job, a.TaskGroup)}
		if a.Job != nil {
			if a.Job.NodePool != nil {
				m.Pool = *a.Job.NodePool
			}
			m.Datacenters = a.Job.Datacenters
		}
		out = append(out, m)
	}
	return out
}

// running are the groups of a node's allocations that its distinct_hosts
// counts: those the scheduler's ProposedAllocs keeps, every one its client has
// not stopped (scheduler/feasible/context.go; a replacement placed is there,
// one the scheduler stopped stays until its client reports it).
func running(allocs []*api.Allocation) []capacity.Group {
	var out []capacity.Group
	for _, a := range allocs {
		g := capacity.Group{Namespace: a.Namespace, Job: a.JobID, Group: a.TaskGroup}
		if !allocGone(a) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

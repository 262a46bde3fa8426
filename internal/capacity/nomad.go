package capacity

import (
	"slices"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocstatus"
	"github.com/rollboot/rollboot/internal/constraint"
)

// What the gate decides on, taken from Nomad's API types: the coordinator
// reads the nodes and allocations and turns them into plain values here.

// NodeOf is a node's capacity: its resources less its reserved resources
// (nomad/structs/funcs.go AllocsFit compares the allocations with
// NodeResources.Comparable less ReservedResources.Comparable), and its
// healthy device instances; and what constraints interpolate on it (a change
// to its attributes or meta bumps its ModifyIndex too). Used and Running are
// left empty: they come from the node's allocations (Used, Running).
func NodeOf(n *api.Node) Node {
	out := Node{Name: n.Name, Pool: n.NodePool, Datacenter: n.Datacenter, Targets: constraint.NodeOf(n)}
	if r := n.NodeResources; r != nil {
		out.Capacity = Resources{CPU: r.Cpu.CpuShares, MemoryMB: r.Memory.MemoryMB}
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
	return out
}

// EmptiedByDrain reports whether nothing on a node whose drain rollboot saw
// complete (its plan drained or rebooting) can move. Nomad marks a drain
// complete only when every allocation but those of system jobs has stopped on
// its client and none it drains is left that is not terminal
// (nomad/drainer/draining_node.go IsDone, RemainingAllocs); what it leaves,
// system allocations, never moves (moves). Still ineligible and not draining
// again, the node is given nothing new that would. A node an operator made
// eligible or drains again since is read like any other node out.
func EmptiedByDrain(n *api.NodeListStub) bool {
	return n != nil && !n.Drain && n.SchedulingEligibility == api.NodeSchedulingIneligible
}

// SortNodes sorts nodes, by ID, into the candidates of each pool ("all":
// every candidate) and the nodes out: draining, or on their way out (leaving,
// sorted). A node neither ready nor eligible is in neither.
func SortNodes(nodes map[string]*api.NodeListStub, leaving []string) (candidates map[string][]string, out []string) {
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

// eligibleReady reports whether n is ready and eligible: a candidate, unless
// it drains or is on its way out.
func eligibleReady(n *api.NodeListStub) bool {
	return n.Status == api.NodeStatusReady && n.SchedulingEligibility == api.NodeSchedulingEligible
}

// Movers are the allocations of a node that its drain moves.
func Movers(allocs []*api.Allocation) []Alloc {
	var out []Alloc
	for _, a := range allocs {
		if !moves(a) {
			continue
		}
		m := Alloc{ID: a.ID, Name: a.Name, Job: a.JobID, Namespace: a.Namespace, Group: a.TaskGroup, Ask: ask(a),
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

// Used is what a node's allocations use (Node.Used): the sum of what each
// uses that its client has not stopped (gone).
func Used(allocs []*api.Allocation) Resources {
	var used Resources
	for _, a := range allocs {
		if !gone(a) {
			used = used.Add(ask(a))
		}
	}
	return used
}

// Running are the groups of a node's allocations that its distinct_hosts
// counts (Node.Running): those the scheduler's ProposedAllocs keeps, every one
// its client has not stopped (scheduler/feasible/context.go; a replacement
// placed is there, one the scheduler stopped stays until its client reports
// it).
func Running(allocs []*api.Allocation) []Group {
	var out []Group
	for _, a := range allocs {
		g := Group{Namespace: a.Namespace, Job: a.JobID, Group: a.TaskGroup}
		if !gone(a) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// gone reports whether an allocation uses no room: its client stopped it
// (allocstatus.ClientTerminal: AllocsFit and the scheduler's proposed
// allocations, scheduler/feasible/context.go ProposedAllocs, count one the
// scheduler stopped until its client reports it stopped).
func gone(a *api.Allocation) bool { return allocstatus.ClientTerminal(a.ClientStatus) }

// moves reports whether a drain moves the allocation: meant to run, not stopped
// by its client, and not of a system or sysbatch job (they stay on their node
// until it is drained). One being stopped already has its replacement.
func moves(a *api.Allocation) bool {
	if gone(a) || a.DesiredStatus != api.AllocDesiredStatusRun {
		return false
	}
	if a.Job != nil && a.Job.Type != nil && (*a.Job.Type == api.JobTypeSystem || *a.Job.Type == api.JobTypeSysbatch) {
		return false
	}
	return true
}

// ask is what an allocation uses: the sum of its tasks' CPU, memory and
// device instances.
func ask(a *api.Allocation) Resources {
	var r Resources
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

package nomadsim

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// The resource model: CPU (MHz) and memory (MB) only. Every node has the
// resources its client fingerprinted (NodeResources) and those its client
// configuration reserves (ReservedResources); every allocation carries the
// resources of its group (AllocatedResources, one task named after the group).
// The scheduler places an allocation only on a node where it fits: the node's
// resources less its reserved resources, less the resources of the allocations
// on it that its client has not stopped (nomad/structs/funcs.go AllocsFit:
// NodeResources.Comparable less ReservedResources.Comparable, against the sum of
// the allocations that are not ClientTerminalStatus; the scheduler's proposed
// allocations, scheduler/feasible/context.go ProposedAllocs, leave out the same).
// An allocation that fits nowhere stays unplaced, as Nomad's would (with a
// blocked evaluation; a system allocation that does not fit one node, with a
// blocked evaluation about that node: evals.go). Not modelled: disk, networks and ports,
// devices, cores, memory oversubscription, preemption.

// Nomad's resources for a task without a resources block (api/resources.go
// DefaultResources: cpu 100, memory 300): a group that gives none gets them.
const (
	DefaultGroupCPU      = 100
	DefaultGroupMemoryMB = 300
)

// Default node resources: what a client fingerprints (client/fingerprint/cpu.go,
// memory.go) on the emulated hosts, with nothing reserved.
const (
	DefaultNodeCPU      = 8000
	DefaultNodeMemoryMB = 7900
)

// NodeResources are a node's resources as its client fingerprints and reserves
// them.
type NodeResources struct {
	CPU              int64 `json:"cpu"`       // MHz
	MemoryMB         int64 `json:"memory_mb"` // MB
	ReservedCPU      int64 `json:"reserved_cpu,omitempty"`
	ReservedMemoryMB int64 `json:"reserved_memory_mb,omitempty"`
}

// groupResources fills a group's resources with Nomad's defaults.
func groupResources(g *GroupSpec) error {
	if g.CPU < 0 || g.MemoryMB < 0 {
		return fmt.Errorf("group %s: cpu and memory_mb must not be negative", g.Name)
	}
	if g.CPU == 0 {
		g.CPU = DefaultGroupCPU
	}
	if g.MemoryMB == 0 {
		g.MemoryMB = DefaultGroupMemoryMB
	}
	return nil
}

// allocatedResources are the resources of an allocation of group: one task
// named after the group (structs.Allocation.AllocatedResources, per task).
func allocatedResources(j *simJob, group string) *api.AllocatedResources {
	g := j.group(group)
	if g == nil {
		return nil
	}
	return &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
		group: {Cpu: api.AllocatedCpuResources{CpuShares: g.CPU}, Memory: api.AllocatedMemoryResources{MemoryMB: g.MemoryMB}},
	}}
}

// room is what each node has free for new allocations, as the scheduler
// counts it in one scheduling round.
type room map[string][2]int64 // node ID -> free CPU, free memory

// roomLocked computes every node's free resources from its allocations that
// its client has not stopped.
func (c *clusterState) roomLocked() room {
	r := room{}
	for id, sn := range c.nodes {
		var free [2]int64
		if nr := sn.node.NodeResources; nr != nil {
			free = [2]int64{nr.Cpu.CpuShares, nr.Memory.MemoryMB}
		}
		if rr := sn.node.ReservedResources; rr != nil {
			free[0] -= int64(rr.Cpu.CpuShares)
			free[1] -= int64(rr.Memory.MemoryMB)
		}
		r[id] = free
	}
	for _, sa := range c.allocs {
		if allocClientTerminal(sa.a) {
			continue
		}
		if ar := sa.a.AllocatedResources; ar != nil {
			f := r[sa.a.NodeID]
			for _, t := range ar.Tasks {
				f[0] -= t.Cpu.CpuShares
				f[1] -= t.Memory.MemoryMB
			}
			r[sa.a.NodeID] = f
		}
	}
	return r
}

// lazyRoom is the room of every node, counted on first use: a scheduling round
// that places nothing (most of them) does not walk every allocation.
type lazyRoom struct {
	c *clusterState
	r room
}

func (l *lazyRoom) get() room {
	if l.r == nil {
		l.r = l.c.roomLocked()
	}
	return l.r
}

func (l *lazyRoom) fits(nodeID string, j *simJob, group string) bool {
	return l.get().fits(nodeID, j, group)
}

func (l *lazyRoom) exhausted(nodeID string, j *simJob, group string) string {
	return l.get().exhausted(nodeID, j, group)
}

func (l *lazyRoom) take(nodeID string, j *simJob, group string) { l.get().take(nodeID, j, group) }

// fits reports whether an allocation of group fits on the node.
func (r room) fits(nodeID string, j *simJob, group string) bool {
	return r.exhausted(nodeID, j, group) == ""
}

// exhausted is the first resource the node lacks for an allocation of group,
// in the order nomad/structs ComparableResources.Superset checks them: "cpu",
// then "memory" ("": it fits).
func (r room) exhausted(nodeID string, j *simJob, group string) string {
	g := j.group(group)
	if g == nil {
		return ""
	}
	f := r[nodeID]
	switch {
	case g.CPU > f[0]:
		return "cpu"
	case g.MemoryMB > f[1]:
		return "memory"
	}
	return ""
}

// take counts an allocation of group placed on the node.
func (r room) take(nodeID string, j *simJob, group string) {
	if g := j.group(group); g != nil {
		f := r[nodeID]
		r[nodeID] = [2]int64{f[0] - g.CPU, f[1] - g.MemoryMB}
	}
}

// check reports what is wrong with the resources of host's node.
func (nr NodeResources) check(host string) error {
	if nr.CPU <= 0 || nr.MemoryMB <= 0 || nr.ReservedCPU < 0 || nr.ReservedMemoryMB < 0 {
		return fmt.Errorf("node resources of %s: cpu and memory_mb must be positive, reserved ones not negative", host)
	}
	return nil
}

// clientResources are the resources host's node registers with
// (Config.ClientResources, or the defaults).
func (c *Config) clientResources(host string) NodeResources {
	if nr, ok := c.ClientResources[host]; ok {
		return nr
	}
	return NodeResources{CPU: DefaultNodeCPU, MemoryMB: DefaultNodeMemoryMB}
}

// nodeResources are the API forms of a node's resources.
func nodeResources(nr NodeResources) (*api.NodeResources, *api.NodeReservedResources) {
	return &api.NodeResources{
			Cpu:    api.NodeCpuResources{CpuShares: nr.CPU, TotalCpuCores: 4},
			Memory: api.NodeMemoryResources{MemoryMB: nr.MemoryMB},
			Disk:   api.NodeDiskResources{DiskMB: 50000},
		}, &api.NodeReservedResources{
			Cpu:    api.NodeReservedCpuResources{CpuShares: uint64(nr.ReservedCPU)},
			Memory: api.NodeReservedMemoryResources{MemoryMB: uint64(nr.ReservedMemoryMB)},
		}
}

// SetNodeResources changes the resources of host's node, as a client restarted
// with another configuration (or on resized hardware) registers them again
// (client/client.go updateNodeFromFingerprint → Node.Register): the node's
// ModifyIndex moves, and the scheduler places what it can in the new room.
func (s *Sim) SetNodeResources(host string, nr NodeResources) error {
	if err := nr.check(host); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return err
	}
	sn.node.NodeResources, sn.node.ReservedResources = nodeResources(nr)
	s.cluster.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
	return nil
}

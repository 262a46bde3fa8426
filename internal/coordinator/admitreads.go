package coordinator

import (
	"context"
	"maps"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacityread"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
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

// workloadView is what a pass read for the workload blockers: why each host
// read for is held (zero: it is not).
type workloadView struct {
	holds map[string]phase.WaitReason
}

// with is v and more: the hosts read for in either (v may be nil; a host in
// both takes more's).
func (v *workloadView) with(more map[string]phase.WaitReason) *workloadView {
	holds := maps.Clone(more)
	if holds == nil {
		holds = map[string]phase.WaitReason{}
	}
	if v != nil {
		for name, why := range v.holds {
			if _, ok := holds[name]; !ok {
				holds[name] = why
			}
		}
	}
	return &workloadView{holds: holds}
}

// read reports whether the host was read for.
func (v *workloadView) read(host string) bool {
	if v == nil {
		return false
	}
	_, ok := v.holds[host]
	return ok
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
// (queued hosts with a node), and why each is held, beside the hosts read for
// earlier in the pass (a hand-out asks for the hosts of the groups it frees a
// slot in: admission.Input.WorkloadHolds).
func (c *Coordinator) readWorkloads(ctx context.Context, s *snapshot, names []string) {
	s.workloads = s.workloads.with(c.workloadHolds(ctx, s, names))
}

// workloadHolds reads what the workload blockers need to decide on hosts, and
// says why each is held; s is only read.
func (c *Coordinator) workloadHolds(ctx context.Context, s *snapshot, names []string) map[string]phase.WaitReason {
	hosts := make([]workloadread.Host, 0, len(names))
	for _, name := range names {
		hv := s.hosts[name]
		h := workloadread.Host{Name: name, NodeID: hv.node.ID, Pool: hostPool(s, hv)}
		if c.opt.Rules.Options(hv.group).HoldSingletons {
			h.Singletons, h.ApprovedUntil = true, s.control.Approvals[name].Until
		}
		hosts = append(hosts, h)
	}
	r := workloadread.Reader{API: c.opt.WorkloadsAPI, Nodes: c.opt.Nodes, Settings: c.opt.Workloads,
		Deployments: c.deployments, Now: func() time.Time { return s.now }}
	return r.Holds(ctx, hosts)
}

// The capacity gate: a host is admitted only if the allocations its drain
// would move fit on the other nodes (package capacity decides). Package
// capacityread reads what it decides on, when admission asks, and keeps each
// node's capacity and a draining node's movers by its ModifyIndex; each
// allocation read is kept for the pass (package allocsource), so that an
// allocation watch starts from it.

// capacityView is what the capacity gate read in a pass.
type capacityView = capacityread.Pass

// readCapacity reads what the capacity gate lacks (needs), into the pass's
// view of it, made at its first read.
func (c *Coordinator) readCapacity(ctx context.Context, s *snapshot, needs admission.CapacityNeeds) {
	if s.capacity == nil {
		s.capacity = c.capacity.NewPass(s.nodes, leavingNodes(s), c.opt.Capacity.Headroom, s.groupOf)
	}
	c.capacity.Read(ctx, s.capacity, needs)
}

// leavingNodes are the nodes of the hosts on their way out. A host whose drain
// the node list does not show yet counts as draining. A rejoining one does
// not: eligible again, it takes allocations, which will not move.
func leavingNodes(s *snapshot) []capacityread.Leaving {
	var out []capacityread.Leaving
	for _, name := range busyNames(s) {
		switch phase := s.plans[name].Phase; phase {
		case store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting:
			if hv := s.hosts[name]; hv.node != nil {
				out = append(out, capacityread.Leaving{NodeID: hv.node.ID, Draining: phase == store.PhaseDraining})
			}
		}
	}
	return out
}

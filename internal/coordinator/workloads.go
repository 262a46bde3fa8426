package coordinator

import (
	"context"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/workload"
	"github.com/rollboot/rollboot/internal/workloadread"
)

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
		hosts = append(hosts, workloadread.Host{Name: name, NodeID: hv.node.ID, Pool: hostPool(s, hv)})
	}
	r := workloadread.Reader{API: c.opt.WorkloadsAPI, Nodes: c.opt.Nodes, Settings: c.opt.Workloads}
	s.workloads = &workloadView{holds: r.Holds(ctx, hosts)}
}

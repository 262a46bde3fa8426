package capacityread

import (
	"slices"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/capacity"
)

// The allocations a draining node still has to move (the gate's movers),
// kept by the node's ModifyIndex while its drain runs. The gate checks a
// queued host against them at every pass that considers it, and a pass runs
// at every change of the rollout: a host the gate holds re-read the
// allocations of every node draining in its pool each time, dozens of times
// per drain. On a node that is draining and ineligible nothing is placed but
// system jobs, which do not move (capacity.Movers), and every change of its
// drain or eligibility moves its ModifyIndex: so while the node list shows the
// same ModifyIndex, the movers read can only have shrunk, as the drain moved
// some away. Those moved are dropped once their replacement shows among the
// allocations the pass read (a migration's replacement names the allocation
// it replaces: PreviousAllocation); one placed on a node the pass did not read
// is still counted, which can only make the gate ask for more of the pool's
// nodes (whose reads show it) or hold the host longer, never admit one that
// does not fit. When the drain completes the node's ModifyIndex moves, and
// nothing on it counts any more (capacity.EmptiedByDrain).

// keepsMovers reports whether the movers read from node n hold while its
// ModifyIndex stays the same: it is draining and ineligible.
func keepsMovers(n *api.NodeListStub) bool {
	return n != nil && n.Drain && n.SchedulingEligibility == api.NodeSchedulingIneligible
}

// keptMovers returns the movers kept of node id at its ModifyIndex in nodes.
func (r *Reader) keptMovers(nodes map[string]*api.NodeListStub, id string) ([]capacity.Alloc, bool) {
	n := nodes[id]
	if !keepsMovers(n) {
		return nil, false
	}
	return r.movers.Get(id, n.ModifyIndex)
}

// keepMovers keeps the movers read of node id, when they hold (keepsMovers).
func (r *Reader) keepMovers(nodes map[string]*api.NodeListStub, id string, movers []capacity.Alloc) {
	if n := nodes[id]; keepsMovers(n) {
		r.movers.Put(id, n.ModifyIndex, movers)
	}
}

// withoutReplaced returns movers but those replaced by one of the allocations
// read (a migration's replacement, PreviousAllocation).
func withoutReplaced(movers []capacity.Alloc, read map[string][]*api.Allocation) []capacity.Alloc {
	replaced := map[string]bool{}
	for _, allocs := range read {
		for _, a := range allocs {
			if a.PreviousAllocation != "" {
				replaced[a.PreviousAllocation] = true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(movers), func(m capacity.Alloc) bool { return m.ID != "" && replaced[m.ID] })
}

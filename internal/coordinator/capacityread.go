package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/parallel"
)

// CapacityReadParallelism bounds the allocation reads of one round of the
// capacity gate sent at once, and the node reads sent beside them. A check
// counts the allocations of every node on its way out (each draining or
// rebooting host of the rollout: fifty at a thousand hosts in ten groups of
// five), read again in each pass that checks; one after the other they took a
// third of a second on a loaded machine, all of it between a slot being freed
// and the next drain. Like PlanWriteParallelism, the bound keeps the burst on
// the Nomad servers small.
const CapacityReadParallelism = 8

// readAllocsOf reads, side by side, the allocations of the nodes ids whose
// allocations this pass has not read yet, into v (capacityAllocs, at once;
// an ID given twice is read once).
func (c *Coordinator) readAllocsOf(ctx context.Context, v *capacityView, ids []string) error {
	var todo []string
	for _, id := range ids {
		if _, ok := v.allocs[id]; !ok && !slices.Contains(todo, id) {
			todo = append(todo, id)
		}
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

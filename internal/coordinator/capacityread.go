package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/nomad/api"

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
	}
	return nil
}

// askedEnough reports whether this round of the gate's reads already holds
// as many hosts of node's group for what it lacks as it has read nodes of
// that group (at least one): then the host waits for a later round instead of
// asking for its allocations too. A host the gate holds gives its slot to the
// next in line, and one whose allocations are not read yet is held: without
// this bound the first round asked for the allocations of every queued host of
// a group with a slot free (hundreds, when every host asked at once), though a
// slot goes to the first that fits. Asking for as many again each round keeps
// the rounds few when hosts do not fit (maxCapacityRounds).
func (v *capacityView) askedEnough(s *snapshot, node string) bool {
	group := s.groupOf[node]
	read := 0
	for id := range v.allocs {
		if _, out := slices.BinarySearch(v.out, id); !out && s.groupOf[id] == group {
			read++
		}
	}
	return v.lacking[group] >= max(1, read)
}

// toRead is how many candidates of pool a round of reads has read once it is
// done: twice as many as before, at least two.
func (v *capacityView) toRead(pool string) int {
	return min(len(v.candidates[pool]), max(2, 2*v.read[pool]))
}

// candidatesToRead returns the candidates whose allocations this round reads
// (capacityRound), so that they are read side by side with the others.
func (v *capacityView) candidatesToRead() []string {
	var ids []string
	for _, pool := range sortedKeys(v.wantPools) {
		for _, id := range v.candidates[pool][:v.toRead(pool)] {
			if _, ok := v.nodes[id]; !ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

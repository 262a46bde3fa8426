package coordinator

import (
	"context"
	"errors"
	"sync"

	"github.com/rollboot/rollboot/internal/parallel"
)

// PlanWriteParallelism bounds the plans a pass stores at once. When many hosts
// need a reboot together (a patch day: every host's sentinel appears within
// minutes), one pass turns each of them from idle to pending, a write per host;
// one after the other they took about a second per thousand hosts before the
// first of them could be admitted. Like the parallel reads of a new leader
// (store.ReadParallelism), the bound keeps the burst on the Nomad servers small.
const PlanWriteParallelism = 16

// planOnly reports whether carrying d out is only storing its plan: no node is
// given back or taken out, no cycle closed, nothing in the control state
// cleared, nothing to alert. Such decisions of different hosts touch different
// variables and nothing else, so they may be stored in any order and at once.
func planOnly(in Input, d Decision) bool {
	return d.Write && !d.StartDrain && !d.CancelDrain && !d.SetEligible && !d.ClearRequest && !d.ClearRelease &&
		d.History == nil && len(d.HandOver) == 0 && d.Unhealthy == "" && !cancelDone(in, d.Plan)
}

// pendingWrite is a decision whose carrying out is only its plan (planOnly).
type pendingWrite struct {
	in Input
	d  Decision
}

// storePlans carries the plan-only decisions of a pass out, at most
// PlanWriteParallelism at a time, each within its own step as any other
// decision (carryOutBounded). It returns every error, joined.
func (c *Coordinator) storePlans(ctx context.Context, writes []pendingWrite) error {
	var (
		mu   sync.Mutex
		errs error
	)
	parallel.Each(len(writes), PlanWriteParallelism, nil, func(i int) {
		if err := c.carryOutBounded(ctx, writes[i].in, writes[i].d); err != nil {
			mu.Lock()
			errs = errors.Join(errs, err)
			mu.Unlock()
		}
	})
	return errs
}

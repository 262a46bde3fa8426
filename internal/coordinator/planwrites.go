package coordinator

import (
	"context"
	"errors"

	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
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
func planOnly(in phase.Input, d phase.Decision) bool {
	return d.Write && !d.StartDrain && !d.CancelDrain && !d.SetEligible && !d.ClearRequest && !d.ClearRelease &&
		d.History == nil && len(d.HandOver) == 0 && d.Unhealthy == "" && !d.ClearCancel
}

// givesBackOnly reports whether carrying d out only gives a node back and closes
// its cycle: cancel the drain, restore eligibility, write the history record (its
// path is the cycle's own), store the plan. Nothing is taken out of service and
// no shared variable is written (a cleared request or release may be an entry
// of the control variable, so those are left out). When a wave of hosts comes
// back together, one pass closes many cycles: one after the other, each closing
// a few writes, the slots they free reached the next hosts only after all of
// them. Each host's own writes keep their crash-safe order (apply).
func givesBackOnly(in phase.Input, d phase.Decision) bool {
	return !d.StartDrain && len(d.HandOver) == 0 && !d.ClearRequest && !d.ClearRelease && !d.ClearCancel
}

// storedTogether reports whether d may be carried out side by side with the
// other such decisions of the pass, after the rest: plan-only decisions and
// those that only give a node back (neither takes anything out of service).
func storedTogether(in phase.Input, d phase.Decision) bool {
	return planOnly(in, d) || givesBackOnly(in, d)
}

// pendingWrite is a decision carried out with the others of its pass
// (storedTogether).
type pendingWrite struct {
	in phase.Input
	d  phase.Decision
	// rejoin is the pass's snapshot when d restores a rejoining host's
	// eligibility: once it is carried out, the pass decides again for the host
	// (rejoinNow); nil for any other decision.
	rejoin *snapshot
}

// storePlans carries the decisions of a pass stored together out, at most
// PlanWriteParallelism at a time, each within its own step as any other
// decision (carryOutBounded). It returns every error, joined.
func (c *Coordinator) storePlans(ctx context.Context, writes []pendingWrite) error {
	errs := make([]error, len(writes)) // each write's, at its index
	parallel.Each(len(writes), PlanWriteParallelism, nil, func(i int) {
		w := writes[i]
		err := c.carryOutBounded(ctx, w.in, w.d)
		if err == nil && w.rejoin != nil {
			err = c.rejoinNow(ctx, w.rejoin, w.in, w.d)
		}
		errs[i] = err
	})
	return errors.Join(errs...)
}

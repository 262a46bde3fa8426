package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
)

// No pass waits for ever. Every request to Nomad has a deadline of its own when
// the client is built by package deadline, but the coordinator does not rely on
// its client for that: each step of a pass runs under a context that ends after
// StepTimeout, so a request that a server accepts and never answers (a stuck
// server, a half-open connection behind a load balancer) ends with its step,
// whatever transport sent it. The steps are reading the snapshot (observe, and
// the system jobs of the hosts admitted), and carrying out one host's decision:
// a host whose request hangs does not hold up the others in the same pass. A
// step cut short fails the pass, which is retried with backoff (wake.go); apply
// is crash-safe, so a step abandoned half way is finished by a later pass.

// DefaultStepTimeout bounds one step of a pass when Options.StepTimeout is 0. It
// is well above what a step takes when Nomad answers: a request's own deadline
// (10 s), and a leadership hand-over (30 s per product) for a host's decision.
const DefaultStepTimeout = 2 * time.Minute

func (c *Coordinator) stepTimeout() time.Duration {
	if c.opt.StepTimeout > 0 {
		return c.opt.StepTimeout
	}
	return DefaultStepTimeout
}

// stepContext is the context of one step of a pass.
func (c *Coordinator) stepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.stepTimeout())
}

// errStepTimeout marks a step of a pass that ran out of its time.
var errStepTimeout = errors.New("step of the reconcile pass timed out: a request to Nomad was not answered")

// stepFailed names the step's timeout in err when that is why it failed (and
// not the end of the pass's own context: the coordinator stopping), and counts
// it.
func (c *Coordinator) stepFailed(step, parent context.Context, err error) error {
	if step.Err() != nil && parent.Err() == nil {
		c.metrics.stepTimeouts.Inc()
		return fmt.Errorf("%w after %s: %w", errStepTimeout, c.stepTimeout(), err)
	}
	return err
}

// carryOutBounded carries one host's decision out within its own step. A
// decision that writes nothing costs nothing: most hosts, most passes.
func (c *Coordinator) carryOutBounded(ctx context.Context, in phase.Input, d phase.Decision) error {
	if !acts(in, d) {
		return nil
	}
	hctx, cancel := c.stepContext(ctx)
	defer cancel()
	if err := c.carryOut(hctx, in, d); err != nil {
		return c.stepFailed(hctx, ctx, err)
	}
	return nil
}

// acts reports whether carrying d out does anything: a write, a drain, a
// cancel carried out. A pass mid-rollout decides nothing new for most hosts
// under way, and queueing those decisions with the plan writes copied each
// one's phase.Input and phase.Decision for nothing.
func acts(in phase.Input, d phase.Decision) bool {
	return d.Changes() || d.ClearCancel
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// cancelDone reports whether a host's cancel suppresses nothing any more, so it
// can be removed from the control state: the host is idle, its record shows no
// need first seen at or before the cancel, and no manual request made at or
// before it is left. A later need is a new request and was never suppressed.
func cancelDone(in Input, next store.Plan) bool {
	if in.CancelAt.IsZero() || in.Host == nil || next.Phase != store.PhaseIdle {
		return false
	}
	if in.Host.RebootRequired && !in.Host.RequestedAt.After(in.CancelAt) {
		return false
	}
	return in.Request == nil || in.Request.At.After(in.CancelAt)
}

// clearCancel removes a host's cancel, if it is still the one given.
func (c *Coordinator) clearCancel(ctx context.Context, host string, at time.Time) error {
	err := c.updateControl(ctx, func(ctl *store.Control) error {
		if ctl.Cancels[host].Equal(at) {
			delete(ctl.Cancels, host)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownVersion) {
		// A newer rollboot wrote the host's entries: they stay as they are, read
		// as a cancel (the safe way), and status lists them under control
		// problems. Failing here would fail every pass of the whole fleet.
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the cancel of %s: %w", host, err)
	}
	return nil
}

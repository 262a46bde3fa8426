package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

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

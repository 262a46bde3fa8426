package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// WithTelemetry runs run with the process's one metrics registry and, when
// telemetry.listen is set, serves it at /metrics beside run. The listener opens
// first, so a bad or busy address fails at start; if serving fails, run is
// stopped too. FleetLock's listener serves the same registry when it is on.
func WithTelemetry(ctx context.Context, cfg *config.Compiled, log *slog.Logger, run func(context.Context, *prometheus.Registry) error) error {
	reg := telemetry.NewRegistry()
	if cfg.Telemetry.Listen == "" {
		return run(ctx, reg)
	}
	ln, err := telemetry.Listen(cfg.Telemetry.Listen)
	if err != nil {
		return err
	}
	log.Info("serving metrics", "address", ln.Addr().String(), "path", telemetry.Path)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := telemetry.Serve(ctx, ln, reg)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("metrics listener: %w", err)
			cancel()
		}
		done <- err
	}()
	err = run(ctx, reg)
	cancel()
	return errors.Join(err, <-done)
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/statuspage"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// WithTelemetry runs run with the process's one metrics registry and, when
// telemetry.listen is set, serves it at /metrics beside run. The listener opens
// first, so a bad or busy address fails at start; if serving fails, run is
// stopped too. FleetLock's listener serves the same registry only with fleetlock.serve_metrics. A
// coordinator candidate (coordinator.enabled) serves the status page there too.
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
	var routes []func(*http.ServeMux)
	pageDone := make(chan struct{})
	if cfg.Coordinator.Enabled {
		page, err := StatusPage(cfg, reg, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		log.Info("serving the status page", "url", "http://"+ln.Addr().String()+statuspage.PathPage)
		routes = append(routes, page.Register)
		go func() { defer close(pageDone); page.Run(ctx) }()
	} else {
		close(pageDone)
	}
	done := make(chan error, 1)
	go func() {
		err := telemetry.Serve(ctx, ln, reg, routes...)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("metrics listener: %w", err)
			cancel()
		}
		done <- err
	}()
	err = run(ctx, reg)
	cancel()
	<-pageDone
	return errors.Join(err, <-done)
}

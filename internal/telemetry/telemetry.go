// Package telemetry serves a process's Prometheus metrics (docs/metrics.md): one
// registry per process, which the agent, the coordinator candidate and the
// FleetLock server all register on, served at /metrics on the telemetry
// listener. It also measures the requests sent to Nomad.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the metrics are served.
const Path = "/metrics"

// NewRegistry returns the registry of a process: the Go runtime's and the
// process's metrics, and the requests sent to Nomad.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		nomadDuration, nomadErrors)
	return reg
}

// Handler serves reg's metrics, and whatever routes adds (the status page).
func Handler(reg *prometheus.Registry, routes ...func(*http.ServeMux)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for _, add := range routes {
		add(mux)
	}
	return mux
}

// Listen opens the telemetry listener, so that a bad address fails at start.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry listener: %w", err)
	}
	return ln, nil
}

// Serve serves reg's metrics, and routes, on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, reg *prometheus.Registry, routes ...func(*http.ServeMux)) error {
	// Requests end with ctx: a stream of the status page's events would
	// otherwise hold the shutdown up.
	srv := &http.Server{Handler: Handler(reg, routes...), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Register registers c on reg, or returns the collector already registered
// there under the same description: a part built again on the process's one
// registry (a coordinator each time its process stands for election, a
// notifier, a node metadata publisher) shares its series. Any other
// registration error is a programming error and panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

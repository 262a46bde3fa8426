package daemon

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/fleetlock"
	"github.com/rollboot/rollboot/internal/store"
)

// FleetLockServer builds the FleetLock server for the configuration: it shares
// the groups with the coordinator and keeps its state in rollboot's variables.
func FleetLockServer(cfg *config.Compiled, log *slog.Logger) (*fleetlock.Server, error) {
	return fleetLockServer(cfg, log, nil)
}

// fleetLockServer builds the FleetLock server with its metrics on reg (nil: a
// registry of its own).
func fleetLockServer(cfg *config.Compiled, log *slog.Logger, reg *prometheus.Registry) (*fleetlock.Server, error) {
	c, err := Client(cfg)
	if err != nil {
		return nil, err
	}
	opt := fleetLockOptions(cfg, Store(cfg, c), c.Nodes(), log)
	opt.Registry = reg
	return fleetlock.New(opt), nil
}

// fleetLockOptions are the FleetLock server's options: the groups of the stored
// policy, and the fleetlock block.
func fleetLockOptions(cfg *config.Compiled, st *store.Store, nodes fleetlock.NodesAPI, log *slog.Logger) fleetlock.Options {
	return fleetlock.Options{
		Store:        st,
		Nodes:        nodes,
		Groups:       cfg.Policy,
		Policy:       (&storedPolicy{st: st, local: cfg}).groups,
		PathPrefix:   cfg.FleetLock.PathPrefix,
		MaxBodyBytes: int64(cfg.FleetLock.MaxBodyBytes),
		Log:          log.With("component", "fleetlock"),

		AllowedIDs:       cfg.FleetLock.AllowedIDs,
		MaxNodelessSlots: cfg.FleetLock.MaxNodelessSlots,
		RequestTimeout:   cfg.FleetLock.RequestTimeout,
		RateLimit:        float64(cfg.FleetLock.RateLimit),
		ClientCertID:     clientCertID(cfg.FleetLock),
		RecordGrace:      cfg.FleetLock.RecordGrace,
		ServeMetrics:     cfg.FleetLock.ServeMetrics,
	}
}

// clientCertID is where client certificates must name their id: only with
// mutual TLS (client_ca), else there is no certificate to look at.
func clientCertID(fc config.FleetLockConfig) string {
	if fc.ClientCA == "" {
		return fleetlock.CertIDNone
	}
	return fc.ClientCertID
}

// AgentFleetLockID is the FleetLock id the agent publishes in its host record:
// none unless agent.publish_fleetlock_id is set, since a published id lets any
// FleetLock client that knows it ask for this host's reboot.
func AgentFleetLockID(ac config.AgentConfig, log *slog.Logger) string {
	if !ac.PublishFleetLockID {
		return ""
	}
	id, err := fleetlock.MachineFleetLockID(ac.MachineIDFile)
	if err != nil {
		// A FleetLock id is optional: say why there is none and carry on.
		log.Warn("no FleetLock id for this host", "err", err)
	}
	return id
}

// ListenFleetLock opens the FleetLock listener of the configuration (with TLS
// when configured), so that a bad address or certificate fails at start.
func ListenFleetLock(cfg *config.Compiled) (net.Listener, error) {
	fc := cfg.FleetLock
	tlsCfg, err := fleetlock.TLSConfig(fleetlock.TLSFiles{Cert: fc.TLSCert, Key: fc.TLSKey, ClientCA: fc.ClientCA})
	if err != nil {
		return nil, err
	}
	return fleetlock.Listen(fc.Listen, tlsCfg)
}

// ServeFleetLock serves FleetLock on ln until ctx ends, with its metrics on the
// process's registry reg. Its listener serves reg at /metrics only with
// fleetlock.serve_metrics: the FleetLock port faces the machines, the metrics
// name every host (the telemetry listener serves them otherwise).
func ServeFleetLock(ctx context.Context, cfg *config.Compiled, ln net.Listener, log *slog.Logger, reg *prometheus.Registry) error {
	srv, err := fleetLockServer(cfg, log, reg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	log.Info("serving FleetLock", "address", ln.Addr().String(), "path_prefix", cfg.FleetLock.PathPrefix,
		"tls", cfg.FleetLock.TLSCert != "", "client_certs", cfg.FleetLock.ClientCA != "", "metrics", cfg.FleetLock.ServeMetrics)
	if cfg.FleetLock.TLSCert == "" {
		log.Warn("FleetLock is served without TLS: anyone who can reach the port can ask for reboots of known ids; use tls_cert and a firewall")
	}
	gctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.RunCollector(gctx, collectEvery(cfg.FleetLock.RecordGrace)) }()
	defer func() { stop(); <-done }()
	return fleetlock.Serve(ctx, ln, srv.Handler())
}

// collectEvery is how often the stale FleetLock records are looked for: a
// quarter of the grace, between a second and ten minutes.
func collectEvery(grace time.Duration) time.Duration {
	return min(max(grace/4, time.Second), 10*time.Minute)
}

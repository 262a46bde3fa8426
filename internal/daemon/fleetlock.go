package daemon

import (
	"context"
	"log/slog"
	"net"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/fleetlock"
)

// FleetLockServer builds the FleetLock server for the configuration: it shares
// the groups with the coordinator and keeps its state in rollboot's variables.
func FleetLockServer(cfg *config.Config, log *slog.Logger) (*fleetlock.Server, error) {
	c, err := Client(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := cfg.PolicyGroups()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		names = append(names, g.Name)
	}
	return fleetlock.New(fleetlock.Options{
		Store:        Store(cfg, c),
		Nodes:        c.Nodes(),
		Groups:       names,
		DefaultGroup: groups[len(groups)-1].Name,
		PathPrefix:   cfg.FleetLock.PathPrefix,
		MaxBodyBytes: int64(cfg.FleetLock.MaxBodyBytes),
		Log:          log.With("component", "fleetlock"),
	}), nil
}

// ListenFleetLock opens the FleetLock listener of the configuration (with TLS
// when configured), so that a bad address or certificate fails at start.
func ListenFleetLock(cfg *config.Config) (net.Listener, error) {
	fc := cfg.FleetLock
	tlsCfg, err := fleetlock.TLSConfig(fleetlock.TLSFiles{Cert: fc.TLSCert, Key: fc.TLSKey, ClientCA: fc.ClientCA})
	if err != nil {
		return nil, err
	}
	return fleetlock.Listen(fc.Listen, tlsCfg)
}

// ServeFleetLock serves FleetLock on ln until ctx ends.
func ServeFleetLock(ctx context.Context, cfg *config.Config, ln net.Listener, log *slog.Logger) error {
	srv, err := FleetLockServer(cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	log.Info("serving FleetLock", "address", ln.Addr().String(), "path_prefix", cfg.FleetLock.PathPrefix,
		"tls", cfg.FleetLock.TLSCert != "", "client_certs", cfg.FleetLock.ClientCA != "")
	return fleetlock.Serve(ctx, ln, srv.Handler())
}

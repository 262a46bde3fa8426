package main

import (
	"context"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
)

// setup loads the configuration and builds the logger of a long-running command.
// The effective configuration is logged once, the token masked (config.Secret).
func setup(cmd *cobra.Command, cf *configFlags, lf *logFlags) (*config.Compiled, *slog.Logger, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, nil, err
	}
	log, err := lf.logger(cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	log.Info("configuration", "config", cfg)
	return cfg, log, nil
}

func newAgentCmd() *cobra.Command {
	var cf configFlags
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the per-host agent (and a coordinator candidate unless coordinator.enabled = false)",
		Long: `Run the per-host agent: it notices that this host needs a reboot, publishes it in
Nomad Variables, waits for the coordinator's go-ahead (after the Nomad node is drained),
reboots, and reports the new boot ID after boot. Unless coordinator.enabled is false it also
stands for election as the coordinator, so a Nomad system job of agents is a whole deployment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			procs := startAgentProcs()
			cfg, log, err := setup(cmd, &cf, &lf)
			if err != nil {
				return err
			}
			procs(cfg.Coordinator.Enabled, log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return daemon.WithTelemetry(ctx, cfg, log, func(ctx context.Context, reg *prometheus.Registry) error {
				return withFleetLock(ctx, cfg, log, reg, func(ctx context.Context) error {
					return daemon.RunAgent(ctx, cfg, daemon.AgentOptions{Log: log, Registry: reg})
				})
			})
		},
	}
	cf.register(cmd)
	lf.register(cmd)
	return cmd
}

func newCoordinatorCmd() *cobra.Command {
	var cf configFlags
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run a standalone coordinator candidate",
		Long: `Run a coordinator without an agent: it stands for election with the Nomad Variable
lock and, while it leads, decides which hosts may reboot and drains them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, &cf, &lf)
			if err != nil {
				return err
			}
			c, err := daemon.Client(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return daemon.WithTelemetry(ctx, cfg, log, func(ctx context.Context, reg *prometheus.Registry) error {
				return withFleetLock(ctx, cfg, log, reg, func(ctx context.Context) error {
					return daemon.RunCoordinator(ctx, cfg, c, log, nil, reg)
				})
			})
		},
	}
	cf.register(cmd)
	lf.register(cmd)
	return cmd
}

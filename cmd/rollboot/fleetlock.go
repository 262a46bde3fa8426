package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/fleetlock"
)

// withFleetLock runs run and, when fleetlock.enabled, the FleetLock server beside
// it. The listener opens first, so a bad address or certificate fails at start;
// if the server stops with an error, run is stopped too.
// FleetLock's metrics go to reg, the process's registry.
func withFleetLock(ctx context.Context, cfg *config.Compiled, log *slog.Logger, reg *prometheus.Registry, run func(context.Context) error) error {
	if !cfg.FleetLock.Enabled {
		return run(ctx)
	}
	ln, err := daemon.ListenFleetLock(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := daemon.ServeFleetLock(ctx, cfg, ln, log, reg)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("FleetLock server: %w", err)
			cancel()
		}
		done <- err
	}()
	err = run(ctx)
	cancel()
	return errors.Join(err, <-done)
}

func newFleetLockIDCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "fleetlock-id",
		Short: "Print this machine's FleetLock id (the id Zincati sends)",
		Long: `Print the FleetLock id of this machine: systemd's app-specific machine ID for
Zincati's app ID, as Zincati computes it (the same as
systemd-id128 machine-id -a ` + fleetlock.ZincatiAppID + `).
Set it as the Nomad node meta ` + fleetlock.NodeMetaKey + ` of a node that runs no rollboot agent,
so that its FleetLock requests drain that node.`,
		Args: noArgs("fleetlock-id"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := fleetlock.MachineFleetLockID(path)
			if err != nil {
				return err
			}
			if id == "" {
				return fmt.Errorf("%s: no such file", path)
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "machine-id-file", "/etc/machine-id", "the machine-id(5) file")
	return cmd
}

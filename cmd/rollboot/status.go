package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/status"
)

func newStatusCmd() *cobra.Command {
	var cf configFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every host's reboot phase",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			ns := cfg.Coordinator.AgentJobNamespace
			if ns == "" {
				ns = cfg.Nomad.Namespace
			}
			src := status.Source{Store: daemon.Store(cfg, c), Nodes: c.Nodes(), Jobs: c.Jobs(),
				AgentJob: cfg.Coordinator.AgentJob, AgentNamespace: ns}
			now := time.Now()
			v, err := status.Read(cmd.Context(), src, now)
			if err != nil {
				return err
			}
			if asJSON {
				return status.WriteJSON(cmd.OutOrStdout(), v)
			}
			return status.WriteText(cmd.OutOrStdout(), v, now)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

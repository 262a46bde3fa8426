package main

import (
	"context"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/denied"
	"github.com/rollboot/rollboot/internal/startpages"
)

// setup loads the configuration and builds the logger of a long-running command.
// The effective configuration is logged once, the token masked (config.Secret).
func setup(cmd *cobra.Command, cf *configFlags, lf *logFlags, role string) (*config.Compiled, *slog.Logger, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, nil, err
	}
	log, err := lf.logger(cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	// A token Nomad refuses is logged once per refusal, naming the policy
	// the token needs, not at every retry. The Nomad version check is refused
	// by every shipped policy (no agent rule) and goes on: it stays a warning.
	log = slog.New(denied.New(log.Handler(), aclPolicyFile(cfg, role), nil, versionUnchecked))
	log.Info("configuration", "config", cfg)
	return cfg, log, nil
}

func newAgentCmd(cf *configFlags, lf *logFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the per-host agent (and a coordinator candidate with coordinator.enabled = true)",
		Long: `Run the per-host agent: it notices that this host needs a reboot, publishes it in
Nomad Variables, waits for the coordinator's go-ahead (after the Nomad node is drained),
reboots, and reports the new boot ID after boot. With coordinator.enabled = true (off by
default) it also stands for election as the coordinator, so a Nomad system job of agents is
a whole deployment.`,
		Args: noArgs("agent"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// What initialising the linked packages touched, before anything else
			// (logged once there is a logger).
			released, releaseErr := startpages.Release()
			procs := startAgentProcs()
			cfg, log, err := setup(cmd, cf, lf, "agent")
			if err != nil {
				return err
			}
			logReleased(log, "initialisation", released, releaseErr)
			procs(cfg.Coordinator.Enabled, log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return daemon.WithTelemetry(ctx, cfg, log, func(ctx context.Context, reg *prometheus.Registry) error {
				return withFleetLock(ctx, cfg, log, reg, func(ctx context.Context) error {
					return daemon.RunAgent(ctx, cfg, daemon.AgentOptions{Log: log, Registry: reg, Started: func() {
						// And what reading the configuration and starting did, then
						// what its first minute did once (its watches' first answers).
						releaseStartPages(log, "start")
						time.AfterFunc(time.Minute, func() { releaseStartPages(log, "the first minute") })
					}})
				})
			})
		},
	}
}

// releaseStartPages gives back the binary's pages that the agent's start
// touched (startpages); docs/performance.md, "The agent's memory", has the
// figures.
func releaseStartPages(log *slog.Logger, after string) {
	n, err := startpages.Release()
	logReleased(log, after, n, err)
}

// logReleased logs what startpages.Release did: at debug level how much was
// resident, as a warning when it could not (the agent then holds more memory,
// nothing else).
func logReleased(log *slog.Logger, after string, n int64, err error) {
	if err != nil {
		log.Warn("could not give back the binary's start-up pages; the agent holds more memory", "after", after, "err", err)
		return
	}
	log.Debug("gave back the binary's start-up pages", "after", after, "resident_kb", n>>10)
}

func newCoordinatorCmd(cf *configFlags, lf *logFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "coordinator",
		Short: "Run a standalone coordinator candidate",
		Long: `Run a coordinator without an agent: it stands for election with the Nomad Variable
lock and, while it leads, decides which hosts may reboot and drains them.`,
		Args: noArgs("coordinator"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, cf, lf, "coordinator")
			if err != nil {
				return err
			}
			// A standalone coordinator is a candidate whatever
			// coordinator.enabled says (an agent's setting, off by default):
			// it serves the status page as one (daemon.WithTelemetry).
			cfg.Coordinator.Enabled = true
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
}

// versionUnchecked is the message of daemon.CheckNomadVersion when Nomad
// refuses the token /v1/agent/self (config_test.go holds them together).
const versionUnchecked = "cannot read the Nomad agent's version: going on without checking it"

// aclPolicyFile names the shipped ACL policy (deploy/acl) the token of a
// daemon of role ("agent" or "coordinator") needs.
func aclPolicyFile(cfg *config.Compiled, role string) string {
	switch {
	case role == "coordinator":
		return "deploy/acl/rollboot-coordinator.policy.hcl"
	case cfg.Coordinator.Enabled:
		return "deploy/acl/rollboot-agent-candidate.policy.hcl"
	}
	return "deploy/acl/rollboot-agent.policy.hcl (deploy/acl/rollboot-agent-server.policy.hcl on a host running a Nomad, Consul or Vault server)"
}

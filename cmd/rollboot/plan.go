package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/preview"
)

func newPlanCmd() *cobra.Command {
	var cf configFlags
	var asJSON bool
	var candidate string
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Preview the rollout without changing anything",
		Long: `Preview the rollout the policy in force produces from the cluster as it is now:
for each group, the hosts that need a reboot in the order they would go, which
would start now, what holds the others, and when each is estimated to start and
finish (from the durations recorded in history and the group's windows). Nothing
is written. With -policy FILE, preview a candidate policy and show how it changes
the plan.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			inForce, src, err := loadPolicyForPlan(ctx, cfg, cf.path)
			if err != nil {
				return err
			}
			clusters, err := daemon.ClustersFromEnv(c)
			if err != nil {
				return err
			}
			history, err := daemon.Store(cfg, c).History(ctx)
			if err != nil {
				return fmt.Errorf("read history: %w", err)
			}
			now := time.Now()
			r := preview.Report{Policy: src}
			if r.Plan, err = daemon.Preview(ctx, inForce, c, clusters, history, now); err != nil {
				return err
			}
			if candidate != "" {
				cand, err := loadCandidatePolicy(inForce, candidate)
				if err != nil {
					return err
				}
				after, err := daemon.Preview(ctx, cand, c, clusters, history, now)
				if err != nil {
					return err
				}
				d := preview.Diff(r.Plan, after)
				r.Candidate, r.After, r.Diff = &preview.Source{Name: "file " + candidate}, &after, &d
			}
			if asJSON {
				return preview.WriteJSON(cmd.OutOrStdout(), r)
			}
			return preview.WriteText(cmd.OutOrStdout(), r)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().StringVar(&candidate, "policy", "", "preview this candidate policy file and show how it changes the plan")
	return cmd
}

// loadPolicyForPlan returns the policy in force, as the configuration the
// coordinator would decide with, and where it comes from: the policy of the
// local configuration file (or the built-in defaults without one).
func loadPolicyForPlan(_ context.Context, cfg *config.Compiled, configPath string) (*config.Compiled, preview.Source, error) {
	if configPath == "" {
		return cfg, preview.Source{Name: "built-in defaults (no -config)"}, nil
	}
	return cfg, preview.Source{Name: "local configuration file " + configPath}, nil
}

// loadCandidatePolicy reads the candidate policy in path, checked like any
// configuration (every problem at once, with file:line:col), and returns the
// configuration in force with the candidate's policy: its groups, windows and
// drain settings. The Nomad connection, the state and the agent settings stay
// those in force.
func loadCandidatePolicy(inForce *config.Compiled, path string) (*config.Compiled, error) {
	cand, err := compileConfig(configFlags{path: path})
	if err != nil {
		return nil, err
	}
	out := *inForce
	out.Policy, out.Drain, out.ForceDrains = cand.Policy, cand.Drain, cand.ForceDrains
	return &out, nil
}

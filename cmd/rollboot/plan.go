package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/preview"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

func newPlanCmd(cf *configFlags) *cobra.Command {
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
		Args: noArgs("plan"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().StringVar(&candidate, "policy", "", "preview this candidate policy file and show how it changes the plan")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		ctx := cmd.Context()
		cfg, c, st := n.cfg, n.client, n.store()
		inForce, src, err := loadPolicyForPlan(ctx, cfg, st)
		if err != nil {
			return err
		}
		clusters, history, err := previewInputs(ctx, c, st)
		if err != nil {
			return err
		}
		now := time.Now()
		r := preview.Report{Policy: src}
		if r.Plan, err = daemon.Preview(ctx, inForce, c, clusters, history, now); err != nil {
			return err
		}
		if candidate != "" {
			cand, err := loadCandidatePolicy(cfg, candidate)
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
	}, nil)
}

// loadPolicyForPlan returns the policy in force, as the configuration the
// coordinator decides with (the stored policy, or the safe default when none is
// stored), and where it comes from.
func loadPolicyForPlan(ctx context.Context, cfg *config.Compiled, st *store.Store) (*config.Compiled, preview.Source, error) {
	inForce, version, err := daemon.PolicyInForce(ctx, cfg, st)
	if err != nil {
		return nil, preview.Source{}, err
	}
	if version == 0 {
		return inForce, preview.Source{Name: "safe default (no policy stored: one group, one host at a time)"}, nil
	}
	return inForce, preview.Source{Name: "stored policy", Version: strconv.Itoa(version)}, nil
}

// loadCandidatePolicy reads the candidate policy file in path, checked as
// `rollboot policy validate` checks it (every problem at once, with
// file:line:col), and returns the local configuration with its rules.
func loadCandidatePolicy(local *config.Compiled, path string) (*config.Compiled, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := storedpolicy.Check(src, path)
	if err != nil {
		return nil, err
	}
	return local.With(r), nil
}

// writePlanChange prints how the candidate rules change `rollboot plan`: the
// hosts whose group, order, start or finish change, and the rollout's finish.
// `rollboot policy apply` prints it before it stores the policy.
func writePlanChange(ctx context.Context, w io.Writer, cfg *config.Compiled, c *api.Client, st *store.Store, cand *config.Rules) error {
	clusters, history, err := previewInputs(ctx, c, st)
	if err != nil {
		return err
	}
	now := time.Now()
	var before preview.Plan
	if inForce, _, err := daemon.PolicyInForce(ctx, cfg, st); err == nil {
		if before, err = daemon.Preview(ctx, inForce, c, clusters, history, now); err != nil {
			return err
		}
	}
	after, err := daemon.Preview(ctx, cfg.With(cand), c, clusters, history, now)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "How the plan changes (rollboot plan):")
	return preview.WriteDiffText(w, preview.Diff(before, after), now)
}

// previewInputs reads what a preview takes besides the policy: the server
// clusters' health access (from the environment, as the coordinator's) and the
// history its estimates come from.
func previewInputs(ctx context.Context, c *api.Client, st *store.Store) (*daemon.Clusters, []store.HistoryRecord, error) {
	clusters, err := daemon.ClustersFromEnv(c)
	if err != nil {
		return nil, nil, err
	}
	history, err := st.History(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	return clusters, history, nil
}

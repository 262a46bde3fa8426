package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// newPolicyCmd is `rollboot policy`: the rollout policy stored in the cluster.
func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check, apply and show the rollout policy stored in the cluster",
	}
	cmd.AddCommand(
		newPolicyValidateCmd(),
		clientCommand(newPolicyApplyCmd()),
		clientCommand(newPolicyShowCmd()),
		clientCommand(newPolicyHistoryCmd()),
	)
	return cmd
}

func readPolicyFile(path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return src, nil
}

func newPolicyValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a policy file without storing it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := readPolicyFile(args[0])
			if err != nil {
				return err
			}
			r, err := storedpolicy.Check(src, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: a valid policy (groups: %s).\n", args[0], strings.Join(r.Policy().Names(), ", "))
			return nil
		},
	}
}

func newPolicyApplyCmd() *cobra.Command {
	var (
		cf         configFlags
		checkIndex uint64
	)
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Check a policy file, show what it changes, and store it as the next version",
		Long: `Check a policy file (every problem at once, with file:line:col), print what it
changes against the stored version (settings, and hosts whose group changes),
then store it with check-and-set: refused if someone applied another version
since it was read, or, with -check-index, if the stored policy's modify index is
not the one given (0: only if none is stored).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			src, err := readPolicyFile(args[0])
			if err != nil {
				return err
			}
			st := daemon.Store(cfg, c)
			ch, err := storedpolicy.Prepare(cmd.Context(), st, c.Nodes(), src, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			storedpolicy.WriteDiff(out, ch)
			if err := writePlanChange(cmd.Context(), out, cfg, c, st, ch.Rules); err != nil {
				// The preview is advice: a token that cannot read what it needs
				// (e.g. autopilot health) does not stop the apply.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: cannot preview how the plan changes: %v\n", err)
			}
			var idx *uint64
			if cmd.Flags().Changed("check-index") {
				idx = &checkIndex
			}
			rec, err := ch.Apply(cmd.Context(), st, appliedBy(c), time.Now(), idx)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Policy version %d applied (modify index %d).\n", rec.Version, rec.ModifyIndex)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().Uint64Var(&checkIndex, "check-index", 0, "store only if the stored policy's modify index is this one (0: only if none is stored)")
	return cmd
}

// appliedBy names who applies a policy: the ACL token's name (never its
// secret), else user@host.
func appliedBy(c *api.Client) string {
	tok, _, err := c.ACLTokens().Self(nil)
	if err == nil && tok != nil && tok.Name != "" {
		return "token " + tok.Name
	}
	return whoAmI()
}

func newPolicyShowCmd() *cobra.Command {
	var (
		cf      configFlags
		version int
	)
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the stored policy's source and version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			rec, err := storedPolicy(cmd, cfg.State.Prefix, daemon.Store(cfg, c))
			if err != nil || rec == nil {
				return err
			}
			v := rec.PolicyVersion
			if version != 0 && version != v.Version {
				found := false
				for _, h := range rec.History {
					if h.Version == version {
						v, found = h, true
						break
					}
				}
				if !found {
					return fmt.Errorf("policy version %d is not kept: `rollboot policy history` lists the versions kept", version)
				}
			}
			writePolicyVersion(cmd.OutOrStdout(), v, rec.ModifyIndex, v.Version == rec.Version)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().IntVar(&version, "version", 0, "print this previous version (default: the stored one)")
	return cmd
}

// storedPolicy reads the stored policy; nil (and a message) when none is stored.
func storedPolicy(cmd *cobra.Command, prefix string, st *store.Store) (*store.PolicyRecord, error) {
	rec, err := st.Policy(cmd.Context())
	switch {
	case err == nil:
		return &rec, nil
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(cmd.OutOrStdout(), "No policy is stored at %s/policy: the coordinator enforces the safe default (one group \"default\", one host at a time, always open).\n", prefix)
		return nil, nil
	}
	return nil, err
}

func writePolicyVersion(w io.Writer, v store.PolicyVersion, index uint64, current bool) {
	fmt.Fprintf(w, "# Version %d, applied by %s at %s from %s", v.Version, v.AppliedBy, v.AppliedAt.UTC().Format(time.RFC3339), v.Filename)
	if current {
		fmt.Fprintf(w, " (stored, modify index %d)", index)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, v.Source)
	if !strings.HasSuffix(v.Source, "\n") {
		fmt.Fprintln(w)
	}
}

func newPolicyHistoryCmd() *cobra.Command {
	var cf configFlags
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the stored policy's version and the previous versions kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			rec, err := storedPolicy(cmd, cfg.State.Prefix, daemon.Store(cfg, c))
			if err != nil || rec == nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAPPLIED AT\tAPPLIED BY\tFILE")
			for _, v := range append([]store.PolicyVersion{rec.PolicyVersion}, rec.History...) {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", v.Version, v.AppliedAt.UTC().Format(time.RFC3339), v.AppliedBy, v.Filename)
			}
			return tw.Flush()
		},
	}
	cf.register(cmd)
	return cmd
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// newPolicyCmd is `rollboot policy`: the rollout policy stored in the cluster.
func newPolicyCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check, apply and show the rollout policy stored in the cluster",
	}
	cmd.AddCommand(
		newPolicyValidateCmd(),
		newPolicyApplyCmd(cf),
		newPolicyShowCmd(cf),
		newPolicyHistoryCmd(cf),
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
		Args:  oneArg("policy validate", "FILE", "policy file's path", ""),
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
			warnInheritedWindows(cmd, r)
			return nil
		},
	}
}

func newPolicyApplyCmd(cf *configFlags) *cobra.Command {
	var checkIndex uint64
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Check a policy file, show what it changes, and store it as the next version",
		Long: `Check a policy file (every problem at once, with file:line:col), print what it
changes against the stored version (settings, and hosts whose group changes),
then store it with check-and-set: refused if someone applied another version
since it was read, or, with -check-index, if the stored policy's modify index is
not the one given (0: only if none is stored).`,
		Args: oneArg("policy apply", "FILE", "policy file's path", ""),
		// The first apply, before any agent runs, finds no state.
		Annotations: map[string]string{emptyStateOK: "yes"},
	}
	cmd.Flags().Uint64Var(&checkIndex, "check-index", 0, "store only if the stored policy's modify index is this one (0: only if none is stored)")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		src, err := readPolicyFile(args[0])
		if err != nil {
			return err
		}
		st := n.store()
		ch, err := storedpolicy.Prepare(cmd.Context(), st, n.client.Nodes(), src, args[0])
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if ch.Unchanged() {
			fmt.Fprintf(out, "Unchanged: the file is stored version %d (modify index %d); nothing was written.\n",
				ch.Current.Version, ch.Current.ModifyIndex)
			return nil
		}
		storedpolicy.WriteDiff(out, ch)
		warnInheritedWindows(cmd, ch.Rules)
		if err := writePlanChange(cmd.Context(), out, n.cfg, n.client, st, ch.Rules); err != nil {
			// The preview is advice: a token that cannot read what it needs
			// (e.g. autopilot health) does not stop the apply.
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: cannot preview how the plan changes: %v\n", err)
		}
		var idx *uint64
		if cmd.Flags().Changed("check-index") {
			idx = &checkIndex
		}
		rec, err := ch.Apply(cmd.Context(), st, appliedBy(n.client), time.Now(), idx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Policy version %d applied (modify index %d).\n", rec.Version, rec.ModifyIndex)
		return nil
	}, nil)
}

// warnInheritedWindows says which groups inherit every window of the file
// while others name theirs (config.Rules.InheritedWindows).
func warnInheritedWindows(cmd *cobra.Command, r *config.Rules) {
	for _, w := range r.InheritedWindows() {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
}

// appliedBy names who applies a policy: the ACL token's name (never its
// secret), else user@host. Nomad's built-in identities name nobody: with ACLs
// off /v1/acl/token/self answers the "ACLs disabled token" (accessor
// acls-disabled), without a token the "Anonymous Token" (accessor anonymous;
// nomad/structs ACLsDisabledToken, AnonymousACLToken).
func appliedBy(c *api.Client) string {
	tok, _, err := c.ACLTokens().Self(nil)
	if err == nil && tok != nil && tok.Name != "" && tok.AccessorID != "acls-disabled" && tok.AccessorID != "anonymous" {
		return "token " + tok.Name
	}
	return whoAmI()
}

func newPolicyShowCmd(cf *configFlags) *cobra.Command {
	var version int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the stored policy's source and version",
		Args:  noArgs("policy show"),
	}
	cmd.Flags().IntVar(&version, "version", 0, "print this previous version (default: the stored one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: the version, its source, who applied it and when, and whether it is the stored one with its modify index")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		rec, err := storedPolicy(cmd, n.cfg.State.Prefix, n.store(), asJSON, `{"stored": false}`)
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
		if asJSON {
			return writePolicyJSON(cmd.OutOrStdout(), v, rec.ModifyIndex, v.Version == rec.Version)
		}
		writePolicyVersion(cmd.OutOrStdout(), v, rec.ModifyIndex, v.Version == rec.Version)
		return nil
	}, nil)
}

// writePolicyJSON writes a policy version as `policy show -json` prints it.
func writePolicyJSON(w io.Writer, v store.PolicyVersion, index uint64, current bool) error {
	out := struct {
		store.PolicyVersion
		Stored      bool   `json:"stored"`
		ModifyIndex uint64 `json:"modify_index,omitempty"`
	}{PolicyVersion: v, Stored: current}
	if current {
		out.ModifyIndex = index
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// storedPolicy reads the stored policy; nil when none is stored, after saying
// so: in words, or, with -json, as the JSON none.
func storedPolicy(cmd *cobra.Command, prefix string, st *store.Store, asJSON bool, none string) (*store.PolicyRecord, error) {
	rec, err := st.Policy(cmd.Context())
	switch {
	case err == nil:
		return &rec, nil
	case errors.Is(err, store.ErrNotFound) && asJSON:
		fmt.Fprintln(cmd.OutOrStdout(), none)
		return nil, nil
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

func newPolicyHistoryCmd(cf *configFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the stored policy's version and the previous versions kept",
		Args:  noArgs("policy history"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: every version kept, newest first, with its source")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		rec, err := storedPolicy(cmd, n.cfg.State.Prefix, n.store(), asJSON, "[]")
		if err != nil || rec == nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(append([]store.PolicyVersion{rec.PolicyVersion}, rec.History...))
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tAPPLIED AT\tAPPLIED BY\tFILE")
		for _, v := range append([]store.PolicyVersion{rec.PolicyVersion}, rec.History...) {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", v.Version, v.AppliedAt.UTC().Format(time.RFC3339), v.AppliedBy, v.Filename)
		}
		return tw.Flush()
	}, nil)
}

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// newResumeCmd lifts the pause of the rollout and the halt of its failure
// budget, or with -group the halt of one group's failure budget. A lifted
// halt is recorded with who lifted it; the failures before it no longer count.
func newResumeCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume a paused rollout, and lift a halt of the failure budget (-group: of one group)",
		Args:  noArgs("resume"),
	}
	var group string
	var asJSON bool
	cmd.Flags().StringVar(&group, "group", "", "lift the halt of this group's failure budget (rollboot status names halted groups); the pause is left as it is")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: what was done, and by whom")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		st := n.store()
		by := sync.OnceValue(func() string { return appliedBy(n.client) })
		msg := ""
		if group == "" {
			if _, err := st.UpdateControl(cmd.Context(), func(c *store.Control) error {
				c.Paused, c.PauseReason, c.PausedAt, c.PausedBy = false, "", time.Time{}, ""
				return nil
			}); err != nil {
				return err
			}
			msg = "Rollout resumed."
		}
		lifted, err := liftHalt(cmd, st, group, by)
		if err != nil {
			return err
		}
		msg = joinMsg(msg, lifted)
		if asJSON {
			return writeControlJSON(cmd.OutOrStdout(), cmd.Name(), nil, msg, by)
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	}, nil)
}

// liftHalt lifts the halt of scope (a group, or "" for the rollout) with
// check-and-set, and says what it did; a scope not halted is left as it is.
func liftHalt(cmd *cobra.Command, st *store.Store, scope string, by func() string) (string, error) {
	var halted bool
	_, err := st.UpdateHalts(cmd.Context(), func(hs policy.HaltState) (policy.HaltState, bool) {
		if _, ok := hs.Halts[scope]; !ok {
			halted = false
			return hs, false
		}
		halted = true
		next, _ := policy.Lift(hs, scope, policy.Resume{At: time.Now().UTC(), By: by()})
		return next, true
	})
	switch {
	case err != nil:
		return "", fmt.Errorf("lift the halt of %s: %w", policy.ScopeName(scope), err)
	case halted:
		return fmt.Sprintf("The halt of %s is lifted: its drains start again, and the failures before now no longer count.", policy.ScopeName(scope)), nil
	case scope != policy.RolloutScope:
		return fmt.Sprintf("%s is not halted.", capitalized(policy.ScopeName(scope))), nil
	}
	return "", nil
}

func joinMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

func capitalized(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

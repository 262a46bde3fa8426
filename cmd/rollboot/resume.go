package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

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

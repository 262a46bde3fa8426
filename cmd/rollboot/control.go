package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/store"
)

// controlCmd builds a command that changes the control variable with CAS. check,
// when not nil, first checks the host the command names (its first argument).
func controlCmd(cf *configFlags, use, short string, args cobra.PositionalArgs, check hostCheck,
	change func(args []string, c *store.Control) (string, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
	}
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		st := n.store()
		if check != nil {
			if err := check(cmd.Context(), st, args[0]); err != nil {
				return err
			}
		}
		var msg string
		_, err := st.UpdateControl(cmd.Context(), func(ctl *store.Control) error {
			m, err := change(args, ctl)
			msg = m
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	}, nil)
}

func whoAmI() string {
	h, _ := os.Hostname()
	if u := os.Getenv("USER"); u != "" {
		return u + "@" + h
	}
	return h
}

func newRequestCmd(cf *configFlags) *cobra.Command {
	var reason string
	cmd := controlCmd(cf, "request HOST", "Ask for a reboot of a host", cobra.ExactArgs(1), knownHostCheck,
		func(args []string, c *store.Control) (string, error) {
			if c.Requests == nil {
				c.Requests = map[string]store.Request{}
			}
			if _, ok := c.Requests[args[0]]; ok {
				return "A reboot of " + args[0] + " was already requested.", nil
			}
			c.Requests[args[0]] = store.Request{At: time.Now().UTC(), By: whoAmI(), Reason: reason}
			return "Reboot of " + args[0] + " requested.", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why the host must reboot (shown in status)")
	return cmd
}

func newCancelCmd(cf *configFlags) *cobra.Command {
	return controlCmd(cf, "cancel HOST", "Cancel a host's current reboot request (before its reboot starts)", cobra.ExactArgs(1), knownHostCheck,
		func(args []string, c *store.Control) (string, error) {
			_, requested := c.Requests[args[0]]
			delete(c.Requests, args[0])
			if c.Cancels == nil {
				c.Cancels = map[string]time.Time{}
			}
			c.Cancels[args[0]] = time.Now().UTC()
			what := "Manual reboot request of " + args[0] + " canceled"
			if !requested {
				what = "No manual request of " + args[0] + " was made: its agent's current need, if any, is canceled"
			}
			return what + ": a drain in progress is undone; a reboot already under way goes on. The canceled need is ignored (rollboot status says so) until the agent finds a new one or `rollboot request " + args[0] + "` asks again.", nil
		})
}

func newPauseCmd(cf *configFlags) *cobra.Command {
	var reason string
	cmd := controlCmd(cf, "pause", "Pause the rollout: no new drain starts; reboots under way finish", cobra.NoArgs, nil,
		func(_ []string, c *store.Control) (string, error) {
			c.Paused, c.PauseReason, c.PausedAt = true, reason, time.Now().UTC()
			return "Rollout paused.", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown in status)")
	return cmd
}

func newResumeCmd(cf *configFlags) *cobra.Command {
	return controlCmd(cf, "resume", "Resume a paused rollout", cobra.NoArgs, nil,
		func(_ []string, c *store.Control) (string, error) {
			c.Paused, c.PauseReason, c.PausedAt = false, "", time.Time{}
			return "Rollout resumed.", nil
		})
}

func newReleaseCmd(cf *configFlags) *cobra.Command {
	return controlCmd(cf, "release HOST", "Free the slot of a host that is stuck, undoing its drain and restoring eligibility", cobra.ExactArgs(1), releasable,
		func(args []string, c *store.Control) (string, error) {
			if c.Releases == nil {
				c.Releases = map[string]time.Time{}
			}
			c.Releases[args[0]] = time.Now().UTC()
			return "Release of " + args[0] + " asked; the coordinator carries it out.", nil
		})
}

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
)

// controlCmd builds a command that changes the control variable with CAS.
func controlCmd(use, short string, args cobra.PositionalArgs, extra func(*cobra.Command),
	change func(args []string, c *store.Control) (string, error)) *cobra.Command {
	var cf configFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			var msg string
			_, err = daemon.Store(cfg, c).UpdateControl(cmd.Context(), func(ctl *store.Control) error {
				m, err := change(args, ctl)
				msg = m
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cf.register(cmd)
	if extra != nil {
		extra(cmd)
	}
	return cmd
}

func whoAmI() string {
	h, _ := os.Hostname()
	if u := os.Getenv("USER"); u != "" {
		return u + "@" + h
	}
	return h
}

func newRequestCmd() *cobra.Command {
	var reason string
	return controlCmd("request HOST", "Ask for a reboot of a host", cobra.ExactArgs(1),
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&reason, "reason", "", "why the host must reboot (shown in status)")
		},
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
}

func newCancelCmd() *cobra.Command {
	return controlCmd("cancel HOST", "Cancel a host's current reboot request (before its reboot starts)", cobra.ExactArgs(1), nil,
		func(args []string, c *store.Control) (string, error) {
			delete(c.Requests, args[0])
			if c.Cancels == nil {
				c.Cancels = map[string]time.Time{}
			}
			c.Cancels[args[0]] = time.Now().UTC()
			return "Reboot request of " + args[0] + " canceled: a drain in progress is undone; a reboot already under way goes on. A need detected later is a new request.", nil
		})
}

func newPauseCmd() *cobra.Command {
	var reason string
	return controlCmd("pause", "Pause the rollout: no new drain starts; reboots under way finish", cobra.NoArgs,
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&reason, "reason", "", "why (shown in status)")
		},
		func(_ []string, c *store.Control) (string, error) {
			c.Paused, c.PauseReason, c.PausedAt = true, reason, time.Now().UTC()
			return "Rollout paused.", nil
		})
}

func newResumeCmd() *cobra.Command {
	return controlCmd("resume", "Resume a paused rollout", cobra.NoArgs, nil,
		func(_ []string, c *store.Control) (string, error) {
			c.Paused, c.PauseReason, c.PausedAt = false, "", time.Time{}
			return "Rollout resumed.", nil
		})
}

func newReleaseCmd() *cobra.Command {
	return controlCmd("release HOST", "Free the slot of a host that is stuck, undoing its drain and restoring eligibility", cobra.ExactArgs(1), nil,
		func(args []string, c *store.Control) (string, error) {
			if c.Releases == nil {
				c.Releases = map[string]time.Time{}
			}
			c.Releases[args[0]] = time.Now().UTC()
			return "Release of " + args[0] + " asked; the coordinator carries it out.", nil
		})
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/store"
)

// controlCmd builds a command that changes the control variable with CAS. check,
// when not nil, first checks the host the command names (its first argument).
// change is given who runs the command: the ACL token's name, as `policy
// apply` records it (appliedBy), asked of Nomad only by a change that records
// it, and once whatever the retries of the check-and-set.
func controlCmd(cf *configFlags, use, short string, args cobra.PositionalArgs, check hostCheck,
	change func(args []string, c *store.Control, by func() string) (string, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
	}
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: what was done, to which host, and by whom")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		st := n.store()
		if check != nil {
			if err := check(cmd.Context(), st, args[0]); err != nil {
				return err
			}
		}
		var msg string
		by := sync.OnceValue(func() string { return appliedBy(n.client) })
		_, err := st.UpdateControl(cmd.Context(), func(ctl *store.Control) error {
			m, err := change(args, ctl, by)
			msg = m
			return err
		})
		if err != nil {
			return err
		}
		if asJSON {
			return writeControlJSON(cmd.OutOrStdout(), cmd.Name(), args, msg, by)
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	}, nil)
}

// writeControlJSON writes what a control command did, as -json prints it:
// the command, its host (if any), its message, and who made the change when
// it records that.
func writeControlJSON(w io.Writer, command string, args []string, msg string, by func() string) error {
	out := struct {
		Command string `json:"command"`
		Host    string `json:"host,omitempty"`
		Message string `json:"message"`
		By      string `json:"by,omitempty"`
	}{Command: command, Message: msg}
	if len(args) > 0 {
		out.Host = args[0]
	}
	if command != "resume" {
		out.By = by()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// oneHost takes the name of one host, and says what is missing otherwise
// (cobra's "accepts 1 arg(s), received 0" names nothing).
func oneHost(verb string) cobra.PositionalArgs {
	return oneArg(verb, "HOST", "host's name", " (rollboot status lists the hosts)")
}

// oneArg takes one argument, a what, shown as ARG in the usage of `rollboot
// verb ARG`; hint follows the error when it is missing.
func oneArg(verb, arg, what, hint string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fmt.Errorf("rollboot %s needs the %s: rollboot %s %s%s", verb, what, verb, arg, hint)
		case len(args) > 1:
			return fmt.Errorf("rollboot %s takes one argument, the %s, got %d: %q (rollboot %s %s)", verb, what, len(args), args, verb, arg)
		}
		return nil
	}
}

// maxOneArg takes at most one argument, shown as ARG in the usage of
// `rollboot verb [ARG]`.
func maxOneArg(verb, arg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return fmt.Errorf("rollboot %s takes at most one %s, got %d: %q (rollboot %s [%s])", verb, strings.ToLower(arg), len(args), args, verb, arg)
		}
		return nil
	}
}

// noArgs refuses arguments, saying that the command takes none (cobra's
// NoArgs says "unknown command").
func noArgs(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("rollboot %s takes no argument, got %q (flags start with -; rollboot %s -h lists them)", verb, args, verb)
		}
		return nil
	}
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
	cmd := controlCmd(cf, "request HOST", "Ask for a reboot of a host", oneHost("request"), knownHostCheck,
		func(args []string, c *store.Control, by func() string) (string, error) {
			if c.Requests == nil {
				c.Requests = map[string]store.Request{}
			}
			if _, ok := c.Requests[args[0]]; ok {
				return "A reboot of " + args[0] + " was already requested.", nil
			}
			c.Requests[args[0]] = store.Request{At: time.Now().UTC(), By: by(), Reason: reason}
			return "Reboot of " + args[0] + " requested.", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why the host must reboot (shown in status)")
	return cmd
}

func newCancelCmd(cf *configFlags) *cobra.Command {
	return controlCmd(cf, "cancel HOST", "Cancel a host's current reboot request (before its reboot starts)", oneHost("cancel"), knownHostCheck,
		func(args []string, c *store.Control, by func() string) (string, error) {
			_, requested := c.Requests[args[0]]
			delete(c.Requests, args[0])
			if c.Cancels == nil {
				c.Cancels = map[string]time.Time{}
			}
			c.Cancels[args[0]] = time.Now().UTC()
			if c.CanceledBy == nil {
				c.CanceledBy = map[string]string{}
			}
			c.CanceledBy[args[0]] = by()
			what := "Manual reboot request of " + args[0] + " canceled"
			if !requested {
				what = "No manual request of " + args[0] + " was made: its agent's current need, if any, is canceled"
			}
			return what + ": a drain in progress is undone; a reboot already under way goes on. The canceled need is ignored (rollboot status says so) until the agent finds a new one or `rollboot request " + args[0] + "` asks again.", nil
		})
}

func newPauseCmd(cf *configFlags) *cobra.Command {
	var reason string
	cmd := controlCmd(cf, "pause", "Pause the rollout: no new drain starts; reboots under way finish", noArgs("pause"), nil,
		func(_ []string, c *store.Control, by func() string) (string, error) {
			c.Paused, c.PauseReason, c.PausedAt, c.PausedBy = true, reason, time.Now().UTC(), by()
			return "Rollout paused.", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown in status)")
	return cmd
}

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

func newReleaseCmd(cf *configFlags) *cobra.Command {
	return controlCmd(cf, "release HOST", "Free the slot of a host that is stuck, undoing its drain and restoring eligibility", oneHost("release"), releasable,
		func(args []string, c *store.Control, by func() string) (string, error) {
			if c.Releases == nil {
				c.Releases = map[string]time.Time{}
			}
			c.Releases[args[0]] = time.Now().UTC()
			if c.ReleasedBy == nil {
				c.ReleasedBy = map[string]string{}
			}
			c.ReleasedBy[args[0]] = by()
			return "Release of " + args[0] + " asked; the coordinator carries it out.", nil
		})
}

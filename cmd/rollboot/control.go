package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/policy"
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
			host := "" // a command whose host is optional (pause) checks what it names itself
			if len(args) > 0 {
				host = args[0]
			}
			if err := check(cmd.Context(), st, host); err != nil {
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
	var urgent bool
	cmd := controlCmd(cf, "request HOST", "Ask for a reboot of a host", oneHost("request"), knownHostCheck,
		func(args []string, c *store.Control, by func() string) (string, error) {
			if c.Requests == nil {
				c.Requests = map[string]store.Request{}
			}
			r, ok := c.Requests[args[0]]
			if ok && (r.Urgent || !urgent) {
				return "A reboot of " + args[0] + " was already requested.", nil
			}
			if !ok {
				r.At = time.Now().UTC()
			} // else made urgent: it keeps its place in line
			r.By, r.Reason, r.Urgent = by(), cmp.Or(reason, r.Reason), urgent
			c.Requests[args[0]] = r
			if urgent {
				return "Urgent reboot of " + args[0] + " requested: it skips its group's maintenance windows and freezes, " +
					"but not a pause (rollboot pause), its node's opt-out (node meta rollboot_pause) nor any safety gate " +
					"(server quorum, capacity, alerts, health gates, workload blockers, its group's slots): those still hold it.", nil
			}
			return "Reboot of " + args[0] + " requested.", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why the host must reboot (shown in status)")
	cmd.Flags().BoolVar(&urgent, "urgent", false, "skip the group's maintenance windows and freezes (never a pause or a safety gate)")
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

// pauseScope is the scope a pause or resume names: a host (argument or
// -host), a group (-group), or the rollout.
type pauseScope struct{ host, group string }

func (p *pauseScope) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.host, "host", "", "only this host (or give it as the argument)")
	cmd.Flags().StringVar(&p.group, "group", "", "only this group's hosts")
}

// resolve takes the host argument, and checks that one scope at most is named.
func (p *pauseScope) resolve(verb string, args []string) error {
	if len(args) == 1 {
		if p.host != "" && p.host != args[0] {
			return fmt.Errorf("rollboot %s: the host is given twice (%q and -host %q): give it once", verb, args[0], p.host)
		}
		p.host = args[0]
	}
	if p.host != "" && p.group != "" {
		return fmt.Errorf("rollboot %s: name a host or a group (-group), not both", verb)
	}
	return nil
}

// pauseEnd is when a pause given -until or -for ends (zero: neither given).
func pauseEnd(until string, dur time.Duration, now time.Time) (time.Time, error) {
	switch {
	case until != "" && dur != 0:
		return time.Time{}, fmt.Errorf("rollboot pause: give -until or -for, not both")
	case dur < 0:
		return time.Time{}, fmt.Errorf("rollboot pause -for %s: must be positive, for example -for 2h", dur)
	case dur > 0:
		return now.Add(dur), nil
	case until == "":
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, until)
	if err != nil {
		return time.Time{}, fmt.Errorf("rollboot pause -until %q: use RFC 3339, for example -until 2027-01-06T08:00:00Z or -until 2027-01-06T08:00:00+01:00", until)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("rollboot pause -until %s: that time has passed", until)
	}
	return t.UTC(), nil
}

func newPauseCmd(cf *configFlags) *cobra.Command {
	var reason, until string
	var dur time.Duration
	var scope pauseScope
	cmd := controlCmd(cf, "pause [HOST]", "Pause the rollout, a group or a host: no new drain starts there; reboots under way finish", maxOneArg("pause", "HOST"), scope.check,
		func(args []string, c *store.Control, by func() string) (string, error) {
			if err := scope.resolve("pause", args); err != nil {
				return "", err
			}
			now := time.Now().UTC()
			end, err := pauseEnd(until, dur, now)
			if err != nil {
				return "", err
			}
			p := store.Pause{At: now, Until: end, Reason: reason, By: by()}
			ends := "until rollboot resume"
			if !end.IsZero() {
				ends = "until " + end.Format(time.RFC3339) + " (it ends by itself; rollboot resume ends it sooner)"
			}
			switch {
			case scope.host != "":
				c.HostPauses = withPause(c.HostPauses, scope.host, p)
				return "Host " + scope.host + " paused " + ends + ".", nil
			case scope.group != "":
				c.GroupPauses = withPause(c.GroupPauses, scope.group, p)
				return "Group " + scope.group + " paused " + ends + ".", nil
			}
			c.Paused, c.PauseReason, c.PausedAt, c.PausedBy, c.PausedUntil = true, reason, now, p.By, end
			return "Rollout paused " + ends + ".", nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown in status)")
	cmd.Flags().StringVar(&until, "until", "", "end the pause by itself at this time (RFC 3339)")
	cmd.Flags().DurationVar(&dur, "for", 0, "end the pause by itself after this long (e.g. 2h)")
	scope.flags(cmd)
	return cmd
}

func withPause(m map[string]store.Pause, name string, p store.Pause) map[string]store.Pause {
	if m == nil {
		m = map[string]store.Pause{}
	}
	m[name] = p
	return m
}

// newResumeCmd lifts a pause: of the rollout, of a group (-group) or of a
// host. Without a host it also lifts the halt of the failure budget of the
// same scope (the rollout's, or the group's), recorded with who lifted it;
// the failures before it no longer count.
func newResumeCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume [HOST]",
		Short: "Resume a paused rollout, group (-group) or host, and lift the halt of the rollout's or the group's failure budget",
		Args:  maxOneArg("resume", "HOST"),
	}
	var scope pauseScope
	var asJSON bool
	scope.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: what was done, and by whom")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		if err := scope.resolve("resume", args); err != nil {
			return err
		}
		st := n.store()
		by := sync.OnceValue(func() string { return appliedBy(n.client) })
		var msg string
		paused := false
		if _, err := st.UpdateControl(cmd.Context(), func(c *store.Control) error {
			msg, paused = resumePause(c, scope)
			return nil
		}); err != nil {
			return err
		}
		if scope.host == "" {
			lifted, err := liftHalt(cmd, st, scope.group, by)
			if err != nil {
				return err
			}
			switch {
			case scope.group == "" || paused:
				msg = joinMsg(msg, lifted)
			case strings.HasSuffix(lifted, "is not halted."):
				msg = "Group " + scope.group + " was neither paused nor halted."
			default:
				msg = lifted // a halt lifted: that the group was not paused says nothing
			}
		}
		if asJSON {
			return writeControlJSON(cmd.OutOrStdout(), cmd.Name(), args, msg, by)
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	}, nil)
}

// resumePause lifts the pause of the scope in c, says what it did, and
// whether there was one.
func resumePause(c *store.Control, scope pauseScope) (string, bool) {
	switch {
	case scope.host != "":
		if _, ok := c.HostPauses[scope.host]; !ok {
			return "Host " + scope.host + " was not paused.", false
		}
		delete(c.HostPauses, scope.host)
		return "Host " + scope.host + " resumed.", true
	case scope.group != "":
		if _, ok := c.GroupPauses[scope.group]; !ok {
			return "Group " + scope.group + " was not paused.", false
		}
		delete(c.GroupPauses, scope.group)
		return "Group " + scope.group + " resumed.", true
	}
	paused := c.Paused
	c.Paused, c.PauseReason, c.PausedAt, c.PausedBy, c.PausedUntil = false, "", time.Time{}, "", time.Time{}
	return "Rollout resumed.", paused
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

// check refuses a pause of a host rollboot does not know, or of a group the
// stored policy does not have: a pause that holds nothing because of a typo
// would let the operator believe it holds. A stored policy that cannot be read
// does not refuse the pause (pausing is the safe direction).
func (p *pauseScope) check(ctx context.Context, st *store.Store, arg string) error {
	host := cmp.Or(arg, p.host)
	switch {
	case host != "":
		return knownHostCheck(ctx, st, host)
	case p.group == "":
		return nil
	}
	groups := []string{policy.DefaultGroupName}
	rec, err := st.Policy(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil
	default:
		f, err := config.ParsePolicy([]byte(rec.Source), rec.Filename)
		if err != nil {
			return nil
		}
		r, err := config.CompilePolicy(f)
		if err != nil {
			return nil
		}
		for _, g := range r.Policy().Groups {
			groups = append(groups, g.Name)
		}
	}
	if !slices.Contains(groups, p.group) {
		return fmt.Errorf("rollboot pause -group %s: the stored policy has no group %q: its groups are %s", p.group, p.group, strings.Join(groups, ", "))
	}
	return nil
}

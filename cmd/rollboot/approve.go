package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/store"
)

// Default lengths of an approval: a host's is for the reboot at hand; a
// group's covers a line of hosts that go one slot at a time.
const (
	approveHostFor  = time.Hour
	approveGroupFor = 24 * time.Hour
)

// newApproveCmd approves hosts: a host awaiting approval in a group with
// approval = "manual" or "webhook" drains once its turn comes, and a host
// held for its singleton jobs (singletons = "hold") may drain though its node
// runs them. The approval is stored in each host's control variable with the
// token's name, lasts -for, and is consumed by the cycle it lets start.
// -group approves every host of the group pending now.
func newApproveCmd(cf *configFlags) *cobra.Command {
	var valid time.Duration
	var group string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approve HOST | -group GROUP",
		Short: "Approve the reboot of a host, or of every host of a group pending now (approval = \"manual\", singletons = \"hold\")",
		Args: func(c *cobra.Command, args []string) error {
			if group != "" && len(args) > 0 {
				return fmt.Errorf("rollboot approve takes a host or -group, not both: got %q with -group %s (rollboot approve HOST, or rollboot approve -group GROUP)", args, group)
			}
			if group != "" {
				return nil
			}
			return oneHost("approve")(c, args)
		},
	}
	cmd.Flags().DurationVar(&valid, "for", approveHostFor, "how long the approval lasts (24h by default with -group)")
	cmd.Flags().StringVar(&group, "group", "", "approve every host of this group pending now (awaiting approval, or in line behind those)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts: what was done, to which hosts, and by whom")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		if group != "" && !cmd.Flags().Changed("for") {
			valid = approveGroupFor
		}
		if valid <= 0 {
			return fmt.Errorf("-for %s: must be > 0 (such as 30m or 2h)", valid)
		}
		st := n.store()
		hosts, err := approveTargets(cmd.Context(), st, args, group)
		if err != nil {
			return err
		}
		by := sync.OnceValue(func() string { return appliedBy(n.client) })
		until := time.Now().UTC().Add(valid).Truncate(time.Second)
		_, err = st.UpdateControl(cmd.Context(), func(c *store.Control) error {
			if c.Approvals == nil {
				c.Approvals = map[string]store.Approval{}
			}
			for _, h := range hosts {
				c.Approvals[h] = store.Approval{Until: until, By: by()}
			}
			return nil
		})
		if err != nil {
			return err
		}
		msg := approvedMessage(hosts, group, until)
		if asJSON {
			return writeControlJSON(cmd.OutOrStdout(), cmd.Name(), hosts, msg, by)
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
		return nil
	}, nil)
}

// approveTargets are the hosts to approve: the host named, known to rollboot;
// or every host of group pending now, by name (none is an error that says
// which groups have hosts pending).
func approveTargets(ctx context.Context, st *store.Store, args []string, group string) ([]string, error) {
	if group == "" {
		if err := knownHostCheck(ctx, st, args[0]); err != nil {
			return nil, err
		}
		return args, nil
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		return nil, err
	}
	var hosts, others []string
	for name, p := range plans {
		switch {
		case p.Phase != store.PhasePending:
		case p.Group == group:
			hosts = append(hosts, name)
		case !slices.Contains(others, p.Group):
			others = append(others, p.Group)
		}
	}
	if len(hosts) == 0 {
		slices.Sort(others)
		hint := "no group has a host pending"
		if len(others) > 0 {
			hint = "groups with hosts pending: " + strings.Join(others, ", ")
		}
		return nil, fmt.Errorf("group %q has no host pending now (%s; rollboot status lists them)", group, hint)
	}
	slices.Sort(hosts)
	return hosts, nil
}

// approvedMessage says what the approval lets happen.
func approvedMessage(hosts []string, group string, until time.Time) string {
	at := until.Format(time.RFC3339)
	if group != "" {
		return fmt.Sprintf("%d host(s) of group %q approved until %s: %s. Each goes when its turn comes, once; a host pending later awaits its own approval.",
			len(hosts), group, at, strings.Join(hosts, ", "))
	}
	return fmt.Sprintf("%s may drain, approved until %s: when its turn comes (approval = \"manual\" or \"webhook\": consumed by that reboot), and though its node runs singletons (singletons = \"hold\").",
		hosts[0], at)
}

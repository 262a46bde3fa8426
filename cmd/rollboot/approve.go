package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/store"
)

// newApproveCmd lets a host whose group holds singletons (singletons =
// "hold") drain though its node runs the only instance of a task group: the
// approval is stored in the host's control variable and lasts -for.
func newApproveCmd(cf *configFlags) *cobra.Command {
	var valid time.Duration
	cmd := controlCmd(cf, "approve HOST", "Let a host held for its singleton jobs drain (singletons = \"hold\"), for a while",
		oneHost("approve"), knownHostCheck,
		func(args []string, c *store.Control, by func() string) (string, error) {
			if valid <= 0 {
				return "", fmt.Errorf("-for %s: must be > 0 (such as 30m or 2h)", valid)
			}
			if c.Approvals == nil {
				c.Approvals = map[string]store.Approval{}
			}
			until := time.Now().UTC().Add(valid).Truncate(time.Second)
			c.Approvals[args[0]] = store.Approval{Until: until, By: by()}
			return fmt.Sprintf("%s may drain though its node runs singletons, until %s; a drain already held for them starts at the next pass.",
				args[0], until.Format(time.RFC3339)), nil
		})
	cmd.Flags().DurationVar(&valid, "for", time.Hour, "how long the approval lasts")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newControlCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "control",
		Short: "Inspect and repair the control state (pause flag, requests, cancels, releases)",
	}
	cmd.AddCommand(newControlResetCmd(cf))
	return cmd
}

func newControlResetCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Repair the control state: keep what can be read, move requests to their host's variable, drop the rest",
		Long: `Repair the control state.

Every readable request, cancel and release left in the control variable moves to
its host's own variable (<prefix>/requests/<host>); entries that cannot be read
are dropped and listed; the control variable keeps only the pause flag. A pause
flag that cannot be read becomes "paused": check the state, then rollboot resume.`,
		Args: noArgs("control reset"),
	}
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		rep, err := n.store().ResetControl(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		for _, h := range rep.Moved {
			fmt.Fprintf(out, "Moved the entries of %s to its own variable.\n", h)
		}
		for _, p := range rep.Dropped {
			fmt.Fprintf(out, "Dropped: %s\n", p)
		}
		fmt.Fprintln(out, "Control state repaired.")
		return nil
	}, nil)
}

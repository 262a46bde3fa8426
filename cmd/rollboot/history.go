package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/history"
)

// writeHaltLog writes the failure budgets' last halts and resumes after the
// cycles; a halt state that cannot be read is said, not an error.
func writeHaltLog(cmd *cobra.Command, n nomadConn) error {
	hs, _, err := n.store().Halts(cmd.Context())
	if err != nil {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "\nHalts and resumes: cannot be read: %v\n", err)
		return err
	}
	return history.WriteHalts(cmd.OutOrStdout(), hs.Log)
}

func newHistoryCmd(cf *configFlags) *cobra.Command {
	var asJSON bool
	var opt history.Options
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Show finished reboot cycles: outcome, who and why, and how long each phase took",
		Args:  noArgs("history"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().StringVar(&opt.Host, "host", "", "only this host's cycles")
	cmd.Flags().IntVarP(&opt.Last, "n", "n", 20, "only the newest N cycles (0: every cycle kept)")
	return clientCommand(cf, cmd, func(cmd *cobra.Command, _ []string, n nomadConn) error {
		if opt.Last < 0 {
			return fmt.Errorf("-n: must be 0 (every cycle) or more, got %d", opt.Last)
		}
		recs, err := n.store().History(cmd.Context())
		if err != nil {
			return fmt.Errorf("read the history: %w", err)
		}
		cs := history.Build(recs, opt)
		if opt.Host != "" && len(cs) == 0 {
			// An empty table would read as "never rebooted": say whether
			// rollboot knows the host at all (a typo, another prefix).
			if err := knownHostCheck(cmd.Context(), n.store(), opt.Host); err != nil {
				return err
			}
		}
		if asJSON {
			return history.WriteJSON(cmd.OutOrStdout(), cs)
		}
		if err := history.WriteText(cmd.OutOrStdout(), cs); err != nil || opt.Host != "" {
			return err
		}
		return writeHaltLog(cmd, n)
	}, nil)
}

package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "rollboot",
		Short:         "Safe, automatic, rolling reboots for HashiCorp Nomad clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newAgentCmd(),
		newCoordinatorCmd(),
		clientCommand(newStatusCmd()),
		clientCommand(newPlanCmd()),
		clientCommand(newHistoryCmd()),
		clientCommand(newRequestCmd()),
		clientCommand(newCancelCmd()),
		clientCommand(newPauseCmd()),
		clientCommand(newResumeCmd()),
		clientCommand(newReleaseCmd()),
		clientCommand(newForgetCmd()),
		newControlCmd(),
		newPolicyCmd(),
		newFleetLockIDCmd(),
		newVersionCmd(),
	)
	// demo, sim and sim-ctl: absent from builds with -tags norollbootsim.
	root.AddCommand(simCommands()...)
	return root
}

package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. The flags every command shares (the
// configuration file, the Nomad address, the state prefix, the log format and
// level) are the root's persistent flags, registered here once; each command
// is handed the part it reads, and its own flags live beside it.
func newRootCmd() *cobra.Command {
	var shared sharedFlags
	root := &cobra.Command{
		Use:           "rollboot",
		Short:         "Safe, automatic, rolling reboots for HashiCorp Nomad clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	shared.register(root.PersistentFlags())
	cf, lf := &shared.config, &shared.log
	root.AddCommand(
		newAgentCmd(cf, lf),
		newCoordinatorCmd(cf, lf),
		newStatusCmd(cf),
		newPlanCmd(cf),
		newHistoryCmd(cf),
		newRequestCmd(cf),
		newCancelCmd(cf),
		newPauseCmd(cf),
		newResumeCmd(cf),
		newReleaseCmd(cf),
		newForgetCmd(cf),
		newControlCmd(cf),
		newPolicyCmd(cf),
		newDoctorCmd(cf),
		newSetupCmd(cf),
		newFleetLockIDCmd(),
		newVersionCmd(),
	)
	// demo, sim, sim-ctl and bench: absent from builds with -tags norollbootsim.
	root.AddCommand(simCommands(lf)...)
	return root
}

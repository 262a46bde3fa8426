package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/version"
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
		clientCommand(newRequestCmd()),
		clientCommand(newCancelCmd()),
		clientCommand(newPauseCmd()),
		clientCommand(newResumeCmd()),
		clientCommand(newReleaseCmd()),
		newControlCmd(),
		newFleetLockIDCmd(),
		newVersionCmd(),
	)
	// demo, sim and sim-ctl: absent from builds with -tags norollbootsim.
	root.AddCommand(simCommands()...)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rollboot version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "rollboot %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

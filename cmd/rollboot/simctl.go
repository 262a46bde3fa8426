//go:build !norollbootsim

package main

import (
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// newSimCtlCmd drives a running emulator's control API, so that a simulated host's
// reboot method can be a plain command: reboot.command = ["rollboot", "sim-ctl",
// "reboot", "--address", "http://127.0.0.1:4646", "client-1"].
func newSimCtlCmd() *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "sim-ctl",
		Short: "Drive the Nomad emulator's control API (reboot a simulated host, make it need a reboot)",
		Long: `Drive the control API of a running emulator (rollboot sim, or rollboot demo -keep):
make a simulated host need a reboot, as an OS update would, or reboot it. An agent run
against the emulator uses "sim-ctl reboot" as its reboot command (docs/emulator.md,
"Running agents against it").`,
		Example: `  rollboot sim-ctl need-reboot --address $NOMAD_ADDR client-2
  rollboot sim-ctl reboot --address http://127.0.0.1:4646 client-1`,
	}
	cmd.PersistentFlags().StringVar(&address, "address", "http://127.0.0.1:4646", "the emulator's address")
	client := func() nomadsim.ControlClient {
		return nomadsim.ControlClient{Addr: address, HTTP: &http.Client{Timeout: 10 * time.Second}}
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "reboot HOST",
		Short: "Reboot a simulated host",
		Args:  oneArg("sim-ctl reboot", "HOST", "simulated host's name", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := client().Reboot(cmd.Context(), args[0])
			return err
		},
	}, &cobra.Command{
		Use:   "need-reboot HOST",
		Short: "Create a simulated host's reboot-required sentinel",
		Args:  oneArg("sim-ctl need-reboot", "HOST", "simulated host's name", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := client().SetRebootRequired(cmd.Context(), args[0], "")
			return err
		},
	})
	return cmd
}

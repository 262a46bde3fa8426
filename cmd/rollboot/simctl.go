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
	}, newNeedRebootCmd(client), newBootBlockCmd(client))
	return cmd
}

// newNeedRebootCmd is `sim-ctl need-reboot HOST`: the sentinel, or with
// -packages Debian's files that name what the reboot installs (its
// fingerprint: the host's wave).
func newNeedRebootCmd(client func() nomadsim.ControlClient) *cobra.Command {
	var packages []string
	cmd := &cobra.Command{
		Use:   "need-reboot HOST",
		Short: "Create a simulated host's reboot-required sentinel",
		Long: `Create a simulated host's reboot-required sentinel. With -packages, write Debian's
/var/run/reboot-required.pkgs and /var/run/reboot-required under the host's folder
instead, as unattended-upgrades does: an agent with the "debian" detector (rollboot
demo's) publishes the list's hash as the need's fingerprint, so hosts given the same
packages form one wave.`,
		Example: `  rollboot sim-ctl need-reboot --address $NOMAD_ADDR client-2
  rollboot sim-ctl need-reboot --address $NOMAD_ADDR -packages linux-image-6.8.0-51-generic client-2`,
		Args: oneArg("sim-ctl need-reboot", "HOST", "simulated host's name", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(packages) > 0 {
				_, err := client().SetPackagesNeeded(cmd.Context(), args[0], packages)
				return err
			}
			_, err := client().SetRebootRequired(cmd.Context(), args[0], "")
			return err
		},
	}
	cmd.Flags().StringSliceVar(&packages, "packages", nil, "the packages the reboot installs (comma-separated)")
	return cmd
}

// newBootBlockCmd is `sim-ctl boot-block HOST`: the host's next reboot takes
// it down for good (a kernel that does not boot), until -undo.
func newBootBlockCmd(client func() nomadsim.ControlClient) *cobra.Command {
	var undo bool
	cmd := &cobra.Command{
		Use:   "boot-block HOST",
		Short: "Make a simulated host fail to boot after its next reboot (-undo: boot again)",
		Args:  oneArg("sim-ctl boot-block", "HOST", "simulated host's name", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := client().SetBootBlocked(cmd.Context(), args[0], !undo)
			return err
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "lift the block: a host held down boots at once")
	return cmd
}

//go:build !norollbootsim

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newSimCtlCmd drives a running emulator's control API, so that a simulated host's
// reboot method can be a plain command: reboot.command = ["rollboot", "sim-ctl",
// "reboot", "--address", "http://127.0.0.1:4646", "client-1"].
func newSimCtlCmd() *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:    "sim-ctl",
		Short:  "Drive the Nomad emulator's control API (reboot a simulated host, make it need a reboot)",
		Hidden: true,
	}
	cmd.PersistentFlags().StringVar(&address, "address", "http://127.0.0.1:4646", "the emulator's address")
	call := func(method, path string) error {
		req, err := http.NewRequest(method, strings.TrimRight(address, "/")+path, nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "reboot HOST",
		Short: "Reboot a simulated host",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return call(http.MethodPost, "/sim/v1/hosts/"+url.PathEscape(args[0])+"/reboot")
		},
	}, &cobra.Command{
		Use:   "need-reboot HOST",
		Short: "Create a simulated host's reboot-required sentinel",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return call(http.MethodPut, "/sim/v1/hosts/"+url.PathEscape(args[0])+"/reboot-required")
		},
	})
	return cmd
}

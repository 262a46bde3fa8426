//go:build !norollbootsim

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/demo"
)

func newDemoCmd(lf *logFlags) *cobra.Command {
	var (
		clients  int
		timeout  time.Duration
		logFile  string
		printCfg bool
		ui, keep bool
		uiListen string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole rolling reboot on an embedded, emulated Nomad cluster",
		Long: `Start an emulated cluster (3 server hosts running Nomad, Consul and Vault servers, and
8 Nomad clients in two node pools with service, batch and system jobs), make every host need a
reboot, run one rollboot agent per host with the coordinator elected among them, show the
progress live, and end with a summary (per-host durations, makespan against its lower bound,
each server cluster's failure tolerance over time) and an independent check of the safety
invariants. The exit status is 0 only if every check holds.

With -ui it serves the status page (the rollout timeline live) and prints its URL. With
-keep the emulated cluster and its agents keep running after the rollout, until Ctrl-C:
it prints the NOMAD_ADDR to export so that status, request, pause and sim-ctl can be tried
against it (docs/walkthrough.md).`,
		Args: noArgs("demo"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printCfg {
				out := cmd.OutOrStdout()
				fmt.Fprintln(out, "# Each agent's local configuration (demo.hcl):")
				if _, err := out.Write(demo.ConfigHCL); err != nil {
					return err
				}
				fmt.Fprintln(out, "\n# The rollout policy, applied with `rollboot policy apply` (policy.hcl):")
				_, err := out.Write(demo.PolicyHCL)
				return err
			}
			opt := demo.Options{Out: cmd.OutOrStdout(), Clients: clients, Timeout: timeout, Keep: keep}
			if ui {
				opt.UI = uiListen
			}
			if logFile != "" {
				f, err := os.Create(logFile)
				if err != nil {
					return err
				}
				defer f.Close()
				log, err := lf.logger(f)
				if err != nil {
					return err
				}
				opt.Log = log
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			sum, err := demo.Run(ctx, opt)
			if err != nil {
				return err
			}
			if !sum.OK() {
				return demo.ErrChecksFailed
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&clients, "clients", 8, "number of client hosts")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long")
	cmd.Flags().StringVar(&logFile, "log-file", "", "write rollboot's own logs to this file")
	cmd.Flags().BoolVar(&printCfg, "print-config", false, "print the configuration and the policy the demo runs with and exit")
	cmd.Flags().BoolVar(&ui, "ui", false, "serve the status page while the demo runs (and print its URL)")
	cmd.Flags().StringVar(&uiListen, "ui-listen", "127.0.0.1:9464", "with -ui: the address to serve the status page on")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the emulated cluster and its agents running after the rollout, until Ctrl-C")
	return cmd
}

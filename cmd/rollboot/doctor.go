package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/doctor"
)

// errBlocked is doctor's error when a finding blocks rollouts: the findings
// are printed already, so it only sets the exit status.
var errBlocked = errors.New("rollboot doctor found problems that block rollouts (the errors above)")

func newDoctorCmd(cf *configFlags) *cobra.Command {
	var asJSON bool
	var timeout, brokerWait time.Duration
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that the cluster can run rollboot (read-only)",
		Long: `Check, without changing anything, that the Nomad cluster can run rollboot:
  - the Nomad version (` + doctor.MinNomadVersion + ` or newer: Variable locks);
  - ACLs on or off, the token in use and the reads rollboot's CLI makes with it, and
    with a management token whether rollboot's ACL policies are those in deploy/acl;
  - the event broker (a short subscription to the node events);
  - the stored rollout policy usable, and a coordinator leading;
  - each ready client's drivers: raw_exec, or docker with privileged containers;
  - the agents' job (coordinator.agent_job) running on every client it should, each
    agent's host record, and an agent on every Nomad server's host;
  - the health of the Consul and Vault clusters whose servers the host records name
    (CONSUL_HTTP_ADDR, VAULT_ADDR and their tokens);
  - clock skew, from the Date of Nomad's answers and the host records' times;
  - rollboot's Variables near Nomad's 64 KiB limit.
Each finding says what was found and how to fix it. The exit status is 1 when an
error blocks rollouts, 0 with warnings only. The coordinator logs the same findings
once at start.`,
		Example: `  rollboot doctor
  rollboot doctor -json | jq '.findings[] | select(.severity != "ok")'`,
		Args: noArgs("doctor"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().DurationVar(&timeout, "timeout", DefaultCLITimeout, "give up on Nomad after this long")
	cmd.Flags().DurationVar(&brokerWait, "broker-wait", doctor.DefaultBrokerWait, "how long the node event stream must stay open to count as working")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := cf.load()
		if err != nil {
			return addressHint(err, addressOf(*cf))
		}
		if timeout <= 0 || brokerWait <= 0 {
			return fmt.Errorf("-timeout %s, -broker-wait %s: both must be positive", timeout, brokerWait)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		findings, err := runDoctor(ctx, cfg, brokerWait)
		if err != nil {
			return err
		}
		if err := renderFindings(cmd.OutOrStdout(), findings, asJSON); err != nil {
			return err
		}
		if doctor.Blocking(findings) {
			return errBlocked
		}
		return nil
	}
	return cmd
}

// runDoctor reads the cluster as cfg names it and checks it.
func runDoctor(ctx context.Context, cfg *config.Compiled, brokerWait time.Duration) ([]doctor.Finding, error) {
	c, dates, err := doctor.NomadClient(cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	clusters, err := daemon.ClustersFromEnv(c)
	if err != nil {
		return nil, err
	}
	src := doctor.Nomad{Client: c, Store: daemon.Store(cfg, c), Consul: clusters.Consul, Vault: clusters.Vault,
		Dates: dates, Namespace: cfg.Nomad.Namespace}
	in := doctor.Read(ctx, src, doctor.ReadOptions{Options: doctor.OptionsFor(cfg), BrokerWait: brokerWait}, time.Now)
	return doctor.Check(in), nil
}

// renderFindings prints the findings: a table with each fix under its
// finding, and a summary; or JSON.
func renderFindings(w io.Writer, fs []doctor.Finding, asJSON bool) error {
	errs, warns := doctor.Count(fs, doctor.Error), doctor.Count(fs, doctor.Warning)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Findings []doctor.Finding `json:"findings"`
			Errors   int              `json:"errors"`
			Warnings int              `json:"warnings"`
			Blocking bool             `json:"blocking"`
		}{fs, errs, warns, doctor.Blocking(fs)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tCHECK\tFINDING")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Severity, f.Check, f.What)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", f.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case errs > 0:
		_, err := fmt.Fprintf(w, "\n%s, %s: rollouts are blocked until the errors are fixed.\n", plural(errs, "error"), plural(warns, "warning"))
		return err
	case warns > 0:
		_, err := fmt.Fprintf(w, "\n%s, no errors: rollboot can roll out.\n", plural(warns, "warning"))
		return err
	}
	_, err := fmt.Fprintln(w, "\nNo problems found.")
	return err
}

// plural is "1 error", "2 errors".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

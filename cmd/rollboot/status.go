package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

func newStatusCmd(cf *configFlags) *cobra.Command {
	var asJSON, watching, verbose bool
	var interval time.Duration
	var last int
	cmd := &cobra.Command{
		Use:   "status [HOST]",
		Short: "Show every host's reboot phase, or one host in full",
		Long: `Show every host's reboot phase and why it waits, in a table of 100 columns (a long
reason is wrapped, and cut after three lines: status HOST, -verbose and -json show it
whole). With HOST, show that host in
full: its phase, need, manual request, cancel and release with who made them, why it
waits, its node and roles, and its last finished cycles (-n). With -watch, draw it
again on every change of rollboot's state and at least every -interval, until
interrupted (Ctrl-C): in place on a terminal, one frame after another below a
separator line otherwise; with -json, one document after another (errors on stderr).`,
		Args: maxOneArg("status", "HOST"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "one line per host, as wide as it is: full node IDs, roles and reasons")
	cmd.Flags().BoolVar(&watching, "watch", false, "draw the status again on every change until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", 10*time.Second, "with -watch: draw again at least this often")
	cmd.Flags().IntVarP(&last, "n", "n", 5, "with HOST: its newest N finished cycles (0: every cycle kept)")
	run := func(cmd *cobra.Command, args []string, n nomadConn) error {
		ns := n.cfg.Coordinator.AgentJobNamespace
		if ns == "" {
			ns = n.cfg.Nomad.Namespace
		}
		st := n.store()
		src := status.Source{Store: st, Nodes: n.client.Nodes(), Jobs: n.client.Jobs(),
			AgentJob: n.cfg.Coordinator.AgentJob, AgentNamespace: ns, Silences: st, Waves: st, Halts: st}
		if last < 0 {
			return fmt.Errorf("-n: must be 0 (every cycle) or more, got %d", last)
		}
		frame := func(ctx context.Context, w io.Writer, now time.Time) error {
			v, err := status.Read(ctx, src, now)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return hostFrame(ctx, w, st, v, args[0], last, now, asJSON)
			}
			return renderStatus(w, v, now, asJSON, verbose)
		}
		if !watching {
			return frame(cmd.Context(), cmd.OutOrStdout(), time.Now())
		}
		if interval <= 0 {
			return fmt.Errorf("-interval %s: must be positive", interval)
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		out := cmd.OutOrStdout()
		return statusWatch{out: out, errOut: cmd.ErrOrStderr(), terminal: !asJSON && isTerminal(out), json: asJSON,
			interval: interval, timeout: n.timeout, state: st.WatchState, frame: frame}.run(ctx)
	}
	// With -watch it runs until interrupted: each of its reads takes -timeout itself.
	return clientCommand(cf, cmd, run, func() bool { return watching })
}

// hostFrame renders host of the view in full (status HOST), or says which
// known hosts the name may mean.
func hostFrame(ctx context.Context, w io.Writer, st *store.Store, v status.View, host string, last int, now time.Time, asJSON bool) error {
	ctl, err := st.Control(ctx)
	if err != nil {
		return fmt.Errorf("read the control state: %w", err)
	}
	recs, err := st.History(ctx)
	if err != nil {
		return fmt.Errorf("read the history: %w", err)
	}
	d, ok := status.Detail(v, host, ctl, recs, last)
	if !ok {
		names := make([]string, len(v.Hosts))
		for i, h := range v.Hosts {
			names[i] = h.Host
		}
		return unknownHostError(host, names)
	}
	if asJSON {
		return status.WriteHostJSON(w, d)
	}
	return status.WriteHost(w, d, now)
}

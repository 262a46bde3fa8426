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
)

func newStatusCmd(cf *configFlags) *cobra.Command {
	var asJSON, watching bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every host's reboot phase",
		Long: `Show every host's reboot phase and why it waits. With -watch, draw it again on every
change of rollboot's state and at least every -interval, until interrupted (Ctrl-C): in
place on a terminal, one frame after another below a separator line otherwise; with -json,
one document after another (errors on stderr).`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().BoolVar(&watching, "watch", false, "draw the status again on every change until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", 10*time.Second, "with -watch: draw again at least this often")
	run := func(cmd *cobra.Command, _ []string, n nomadConn) error {
		ns := n.cfg.Coordinator.AgentJobNamespace
		if ns == "" {
			ns = n.cfg.Nomad.Namespace
		}
		st := n.store()
		src := status.Source{Store: st, Nodes: n.client.Nodes(), Jobs: n.client.Jobs(),
			AgentJob: n.cfg.Coordinator.AgentJob, AgentNamespace: ns, Silences: st}
		frame := func(ctx context.Context, w io.Writer, now time.Time) error {
			v, err := status.Read(ctx, src, now)
			if err != nil {
				return err
			}
			return renderStatus(w, v, now, asJSON)
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

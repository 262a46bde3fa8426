package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/statuspage"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// serveUI serves the status page of the emulated cluster, and the metrics of
// every agent's coordinator candidate (reg: they all run in this process), on
// addr until ctx ends. It returns the page's URL and a function that waits for
// the server to stop.
func serveUI(ctx context.Context, addr string, client *api.Client, st *store.Store, reg *prometheus.Registry,
	log *slog.Logger) (string, func() error, error) {
	ln, err := telemetry.Listen(addr)
	if err != nil {
		return "", nil, fmt.Errorf("demo -ui: %w", err)
	}
	page := statuspage.New(statuspage.Source{
		Status: status.Source{Store: st, Nodes: client.Nodes(), Jobs: client.Jobs(),
			AgentJob: "rollboot", AgentNamespace: "default", Waves: st, Halts: st},
		History: st.History,
		Watch:   st.WatchState,
		Process: "rollboot demo (every agent of the emulated cluster)",
		Metrics: reg,
		Resync:  statuspage.MinResync,
	}, log)
	var wg sync.WaitGroup
	var serveErr error
	wg.Add(2)
	go func() { defer wg.Done(); page.Run(ctx) }()
	go func() { defer wg.Done(); serveErr = telemetry.Serve(ctx, ln, reg, page.Register) }()
	return "http://" + ln.Addr().String() + statuspage.PathPage, func() error { wg.Wait(); return serveErr }, nil
}

// keepMessage tells a newcomer how to use the cluster the demo leaves running.
func keepMessage(out io.Writer, nomadAddr, ui string) {
	fmt.Fprintf(out, "\nThe emulated cluster and its agents keep running until Ctrl-C. In another shell:\n\n")
	fmt.Fprintf(out, "  export NOMAD_ADDR=%s\n", nomadAddr)
	fmt.Fprintf(out, "  rollboot status -watch                      # every host's phase, redrawn on change\n")
	fmt.Fprintf(out, "  rollboot request client-1 -reason \"try it\"    # ask for a reboot\n")
	fmt.Fprintf(out, "  rollboot sim-ctl need-reboot --address $NOMAD_ADDR client-2   # as an OS update would\n")
	fmt.Fprintf(out, "  rollboot pause -reason \"lunch\"; rollboot resume\n")
	fmt.Fprintf(out, "  rollboot plan                               # the queue and estimates, changing nothing\n")
	fmt.Fprintf(out, "  rollboot history                            # finished cycles and their timings\n")
	fmt.Fprintf(out, "  rollboot policy show                        # the stored policy and its version\n")
	if ui != "" {
		fmt.Fprintf(out, "\nStatus page: %s\n", ui)
	}
	fmt.Fprintln(out, "\nSee docs/walkthrough.md.")
}

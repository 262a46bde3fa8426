package daemon

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/statuspage"
)

// StatusPage is the status page of a process that is a coordinator candidate
// (coordinator.enabled): its token reads every variable the page shows. It
// reads through a Nomad client of its own; reg tells whether the process leads.
func StatusPage(cfg *config.Compiled, reg prometheus.Gatherer, log *slog.Logger) (*statuspage.Server, error) {
	c, err := Client(cfg)
	if err != nil {
		return nil, err
	}
	st := Store(cfg, c)
	process := cfg.Agent.Host
	if process == "" {
		process, _ = os.Hostname()
	}
	src := statuspage.Source{
		Status: status.Source{Store: st, Nodes: c.Nodes(), Jobs: c.Jobs(),
			AgentJob: cfg.Coordinator.AgentJob, AgentNamespace: agentJobNamespace(cfg)},
		History: st.History,
		Watch:   st.WatchState,
		Process: process,
		Metrics: reg,
		Resync:  max(cfg.Coordinator.ResyncInterval, statuspage.MinResync),
	}
	return statuspage.New(src, log.With("component", "status-page")), nil
}

package daemon

import (
	"log/slog"
	"net"
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
			AgentJob: cfg.Coordinator.AgentJob, AgentNamespace: agentJobNamespace(cfg), Waves: st, Halts: st},
		History: st.History,
		Watch:   st.WatchState,
		Process: process,
		Metrics: reg,
		Resync:  max(cfg.Coordinator.ResyncInterval, statuspage.MinResync),
	}
	page := statuspage.New(src, log.With("component", "status-page"))
	page.AllowHosts(pageHosts(cfg)...)
	return page, nil
}

// pageHosts are the names the status page answers to beside IP addresses and
// localhost: telemetry.allowed_hosts, the listener's host when it is a name,
// and the names of the host the process runs on, which no web site controls
// (an operator opens http://<host>:9464/ on a listener bound to every address).
func pageHosts(cfg *config.Compiled) []string {
	names := append([]string{cfg.Agent.Host}, cfg.Telemetry.AllowedHosts...)
	if h, _, err := net.SplitHostPort(cfg.Telemetry.Listen); err == nil {
		names = append(names, h)
	}
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	return names
}

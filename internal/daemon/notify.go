package daemon

import (
	"log/slog"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// NodeMeta returns the coordinator's publisher of dynamic node metadata.
func NodeMeta(c *api.Client, reg *prometheus.Registry, log *slog.Logger) *nodemeta.Publisher {
	return nodemeta.New(nodemeta.Options{API: c.Nodes().Meta(), Registry: reg, Log: log.With("component", "nodemeta")})
}

// Notifier returns the coordinator's notifier for the notify block, or nil when
// it names no URL. A URL that cannot be opened (a Matrix login refused) is
// logged, redacted, and left out; with none left there is no notifier, and the
// events stay unsent for a coordinator that can send them.
func Notifier(cfg *config.Compiled, st *store.Store, reg *prometheus.Registry, log *slog.Logger) *notify.Notifier {
	n := cfg.Notify
	if len(n.URLs) == 0 {
		return nil
	}
	urls := make([]string, len(n.URLs))
	for i, u := range n.URLs {
		urls[i] = u.Reveal()
	}
	log = log.With("component", "notify")
	targets, err := notify.NewTargets(urls)
	if err != nil {
		log.Error("notification URLs left out", "err", err)
	}
	if len(targets) == 0 {
		return nil
	}
	var events []notify.Kind
	for _, e := range n.Events {
		events = append(events, notify.Kind(e))
	}
	return notify.New(notify.Options{
		Store: st, Targets: targets, Messages: cfg.NotifyMessages, Events: events,
		Timeout: n.Timeout, Queue: n.Queue, Retries: 2, Registry: reg, Log: log,
	})
}

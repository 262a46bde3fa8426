package statuspage

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

// Source is where the page's data comes from.
type Source struct {
	// Status is read as `rollboot status` reads it.
	Status status.Source
	// History reads the finished cycles.
	History func(ctx context.Context) ([]store.HistoryRecord, error)
	// Watch blocks until rollboot's state changes past index or wait passes
	// (store.Store.WatchState); nil: the page is read again every Resync only.
	Watch func(ctx context.Context, index uint64, wait time.Duration) (uint64, error)
	// Process names the process that serves the page (its host).
	Process string
	// Metrics is the process's registry: whether this process leads
	// (rollboot_leader). nil: not known.
	Metrics prometheus.Gatherer
	// Resync is how often the page is read again without a change seen (the
	// agents' allocations and nodes are not watched); default 10s.
	Resync time.Duration
}

// Leader texts: whether the process that serves the page leads.
const (
	LeaderThis    = "leads"
	LeaderOther   = "standby: another coordinator leads or none does"
	LeaderUnknown = "not known"
)

// Read reads the page at now. Every coordinator reads the same stored state,
// so every coordinator serves the same page whichever leads; only whether
// this process leads is its own.
func (s Source) Read(ctx context.Context, now time.Time) (Page, error) {
	v, err := status.Read(ctx, s.Status, now)
	if err != nil {
		return Page{}, err
	}
	var hist []store.HistoryRecord
	if s.History != nil {
		if hist, err = s.History(ctx); err != nil {
			return Page{}, fmt.Errorf("read history: %w", err)
		}
	}
	return Build(Input{Now: now, Process: s.Process, Leader: leads(s.Metrics), View: v, History: hist}), nil
}

// leads tells whether this process leads, from its own registry.
func leads(g prometheus.Gatherer) string {
	if g == nil {
		return LeaderUnknown
	}
	mfs, err := g.Gather()
	if err != nil {
		return LeaderUnknown
	}
	for _, mf := range mfs {
		if mf.GetName() != "rollboot_leader" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return LeaderThis
			}
		}
		return LeaderOther
	}
	return LeaderUnknown
}

// MinResync is the shortest Resync a process's page takes (a coordinator's
// resync interval may be much shorter, as in the demo).
const MinResync = 2 * time.Second

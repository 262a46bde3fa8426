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
	// (rollboot_leader) and, while it does, the slot limits of its last pass
	// (rollboot_group_slots_limit). nil: neither is known.
	Metrics prometheus.Gatherer
	// Resync is how often the page is read again without a change seen (the
	// agents' allocations and nodes are not watched); default 10s.
	Resync time.Duration
}

// Leader texts.
const (
	LeaderThis    = "this process leads"
	LeaderOther   = "this process is a candidate and does not lead"
	LeaderUnknown = "not known to this process"
)

// Read reads the page at now.
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
	leader, limits := fromMetrics(s.Metrics)
	return Build(Input{Now: now, Process: s.Process, Leader: leader, View: v, History: hist, SlotsLimit: limits}), nil
}

// fromMetrics reads whether this process leads and, if it does, the slot
// limits of its last pass, from its own registry.
func fromMetrics(g prometheus.Gatherer) (leader string, limits map[string]int) {
	if g == nil {
		return LeaderUnknown, nil
	}
	mfs, err := g.Gather()
	if err != nil {
		return LeaderUnknown, nil
	}
	leader = LeaderUnknown
	limits = map[string]int{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "rollboot_leader":
			leader = LeaderOther
			for _, m := range mf.GetMetric() {
				if m.GetGauge().GetValue() == 1 {
					leader = LeaderThis
				}
			}
		case "rollboot_group_slots_limit":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "group" {
						limits[l.GetValue()] = int(m.GetGauge().GetValue())
					}
				}
			}
		}
	}
	if leader != LeaderThis {
		return leader, nil // a candidate that does not lead has cleared them
	}
	return leader, limits
}

// MinResync is the shortest Resync a process's page takes (a coordinator's
// resync interval may be much shorter, as in the demo).
const MinResync = 2 * time.Second

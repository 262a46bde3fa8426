package preview

import (
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Durations are how long the steps of one reboot cycle take.
type Durations struct {
	Drain  time.Duration `json:"drain"`  // draining until the drain completed
	Reboot time.Duration `json:"reboot"` // drained until the reboot was seen (hooks, delay, the reboot)
	Rejoin time.Duration `json:"rejoin"` // the reboot seen until the slot is freed
	// Samples is how many finished cycles the medians come from (0: defaults).
	Samples int `json:"samples"`
	// Source says where they come from: SourceGroup, SourceAll or SourceDefault.
	Source string `json:"source"`
}

// Where a group's durations come from.
const (
	SourceGroup   = "group"      // the medians of the group's own history
	SourceAll     = "all groups" // the group has none: the medians of every group's
	SourceDefault = "default"    // no history at all: DefaultDurations
)

// DefaultDurations are used while no cycle has been recorded at all: a drain of a
// node with a few allocations, a server's reboot, and the checks after it.
var DefaultDurations = Durations{Drain: 2 * time.Minute, Reboot: 3 * time.Minute, Rejoin: time.Minute, Source: SourceDefault}

// Cycle is the whole cycle: drain, reboot and rejoin.
func (d Durations) Cycle() time.Duration { return d.Drain + d.Reboot + d.Rejoin }

// sample is one finished cycle's step durations.
type sample struct{ drain, reboot, rejoin time.Duration }

// measure returns a cycle's step durations from its history record, and false
// for a record that did not reboot or whose timeline is incomplete.
func measure(h store.HistoryRecord) (sample, bool) {
	draining, drained := h.Timeline[store.PhaseDraining], h.Timeline[store.PhaseDrained]
	rejoining := h.Timeline[store.PhaseRejoining]
	if h.Outcome != "rebooted" || draining.IsZero() || drained.IsZero() || rejoining.IsZero() || h.Finished.IsZero() {
		return sample{}, false
	}
	s := sample{drained.Sub(draining), rejoining.Sub(drained), h.Finished.Sub(rejoining)}
	if s.drain < 0 || s.reboot < 0 || s.rejoin < 0 {
		return sample{}, false
	}
	return s, true
}

// Measure returns the median step durations of each group's finished reboots in
// history, by group; the key "" holds the medians over every group.
func Measure(history []store.HistoryRecord) map[string]Durations {
	by := map[string][]sample{}
	for _, h := range history {
		if s, ok := measure(h); ok {
			by[h.Group] = append(by[h.Group], s)
			if h.Group != "" {
				by[""] = append(by[""], s)
			}
		}
	}
	out := map[string]Durations{}
	for g, ss := range by {
		src := SourceGroup
		if g == "" {
			src = SourceAll
		}
		out[g] = Durations{
			Drain:   median(ss, func(s sample) time.Duration { return s.drain }),
			Reboot:  median(ss, func(s sample) time.Duration { return s.reboot }),
			Rejoin:  median(ss, func(s sample) time.Duration { return s.rejoin }),
			Samples: len(ss), Source: src,
		}
	}
	return out
}

// durationsFor returns the group's medians, else every group's, else the defaults.
func durationsFor(measured map[string]Durations, group string) Durations {
	if d, ok := measured[group]; ok && group != "" {
		return d
	}
	if d, ok := measured[""]; ok {
		d.Source = SourceAll
		return d
	}
	return DefaultDurations
}

// median is the median of f over ss (the mean of the middle two for an even
// count), rounded to the second.
func median(ss []sample, f func(sample) time.Duration) time.Duration {
	v := make([]time.Duration, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return m.Round(time.Second)
}

package policy

import (
	"fmt"
	"slices"
	"time"
)

// DrainRateWindow is the rolling window of RolloutBudget.MaxDrainsPerHour.
const DrainRateWindow = time.Hour

// RolloutBudget caps the whole rollout, all groups together, on top of each
// group's own budget: at most MaxOut hosts out for rollboot at once, and at
// most MaxDrainsPerHour drains started in any rolling hour. 0: no cap.
type RolloutBudget struct {
	MaxOut           int
	MaxDrainsPerHour int
}

// On reports whether either cap is set.
func (b RolloutBudget) On() bool { return b.MaxOut > 0 || b.MaxDrainsPerHour > 0 }

// Hold says why one more drain may not start at now (""; it may), given the
// hosts out for rollboot (all groups) and when the drains of the last hour
// started (older ones are ignored), and when the drain rate lets one more start
// (zero: when a host comes back, for max_out). One more may start while
//
//	out < MaxOut  and  |{s in starts : now-1h < s <= now}| < MaxDrainsPerHour
//
// (each cap only when set).
func (b RolloutBudget) Hold(out int, starts []time.Time, now time.Time) (string, time.Time) {
	if b.MaxOut > 0 && out >= b.MaxOut {
		return fmt.Sprintf("rollout max_out: %d of %d hosts out", out, b.MaxOut), time.Time{}
	}
	if b.MaxDrainsPerHour <= 0 {
		return "", time.Time{}
	}
	var recent []time.Time
	for _, s := range starts {
		if now.Sub(s) < DrainRateWindow && !s.After(now) {
			recent = append(recent, s)
		}
	}
	if len(recent) < b.MaxDrainsPerHour {
		return "", time.Time{}
	}
	// One more may start once the oldest of the last MaxDrainsPerHour is an
	// hour old.
	slices.SortFunc(recent, func(a, b time.Time) int { return a.Compare(b) })
	until := recent[len(recent)-b.MaxDrainsPerHour].Add(DrainRateWindow)
	return fmt.Sprintf("rollout max_drains_per_hour: %d drains started in the last hour, of %d; the next may start at %s",
		len(recent), b.MaxDrainsPerHour, until.UTC().Format(time.RFC3339)), until
}

// RecentStarts returns the drain starts of starts within the rate window
// before now, and now: what a grant at now keeps in its plan.
func RecentStarts(starts []time.Time, now time.Time) []time.Time {
	var out []time.Time
	for _, s := range starts {
		if now.Sub(s) < DrainRateWindow {
			out = append(out, s)
		}
	}
	return append(out, now)
}

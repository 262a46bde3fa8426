package preview

import (
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// rolloutCap is the rollout budget (max_out, max_drains_per_hour) as serve
// applies it across the groups: the hosts out, each from its start until it
// comes back (zero: not known to come back), and the drains started, those
// of the last hour and those the estimate starts.
type rolloutCap struct {
	b      policy.RolloutBudget
	now    time.Time
	outs   []outSpan
	starts []time.Time
}

// newRolloutCap is the budget b over the hosts already out and the drains
// already started; nil when b caps nothing.
func newRolloutCap(b policy.RolloutBudget, now time.Time, parts []*groupPart, starts []time.Time) *rolloutCap {
	if !b.On() {
		return nil
	}
	r := &rolloutCap{b: b, now: now, starts: append([]time.Time(nil), starts...)}
	for _, gp := range parts {
		for _, h := range gp.active {
			r.outs = append(r.outs, outSpan{from: now, until: h.Finish})
		}
	}
	return r
}

// earliest returns the earliest time from t at which the budget lets one
// more drain start, as admission counts (policy.RolloutBudget.Hold); false
// when none does within Reach.
func (r *rolloutCap) earliest(t time.Time) (time.Time, bool) {
	for t.Sub(r.now) <= Reach {
		out, back := 0, time.Time{}
		for _, o := range r.outs {
			if o.from.After(t) || !o.until.IsZero() && !o.until.After(t) {
				continue
			}
			out++
			if !o.until.IsZero() && (back.IsZero() || o.until.Before(back)) {
				back = o.until
			}
		}
		why, until := r.b.Hold(out, r.starts, t)
		switch {
		case why == "":
			return t, true
		case !until.IsZero():
			t = until // the drain rate
		case back.IsZero():
			return time.Time{}, false // max_out, and none of the hosts out is known to come back
		default:
			t = back
		}
	}
	return time.Time{}, false
}

// take counts a host estimated out from start to finish.
func (r *rolloutCap) take(start, finish time.Time) {
	r.outs = append(r.outs, outSpan{from: start, until: finish})
	r.starts = append(r.starts, start)
}

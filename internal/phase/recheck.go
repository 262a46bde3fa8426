package phase

import (
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// recheckAt is when the decision for the host can change with nothing else
// changing (zero: never): a backoff's next try, or a deadline of its phase that
// Step compares with ">=" (so a pass at that instant sees it run out). The loop
// runs a pass then (controller-runtime's RequeueAfter), and derives no deadline
// of its own.
func recheckAt(in Input, p store.Plan) time.Time {
	t := in.Timing
	var at []time.Time
	switch p.Phase {
	case store.PhasePending, store.PhaseBackoff:
		at = append(at, p.NextTry)
		if interruptedAfterDrain(p) && t.RejoinTimeout > 0 {
			at = append(at, p.PhaseSince.Add(t.RejoinTimeout)) // rebootedAnyway's wait
		}
	case store.PhaseDraining:
		if !t.ForceOnTimeout && t.DrainDeadline > 0 {
			at = append(at, p.PhaseSince.Add(t.DrainDeadline))
		}
	case store.PhaseDrained, store.PhaseRebooting:
		if t.RejoinTimeout > 0 {
			at = append(at, p.PhaseSince.Add(t.RejoinTimeout))
		}
	case store.PhaseRejoining:
		since := rejoinSince(p)
		if t.RejoinTimeout > 0 {
			at = append(at, since.Add(t.RejoinTimeout))
		}
		if in.Healthy.Deadline > 0 {
			at = append(at, since.Add(in.Healthy.Deadline))
		}
		if !in.PostGate.IsZero() {
			at = append(at, in.PostGateRecheck)
		}
	}
	if p.Active() && !p.NodeGoneSince.IsZero() {
		at = append(at, p.NodeGoneSince.Add(t.NodeGoneGrace))
	}
	return earliestAfter(in.Now, at)
}

// rejoinSince is when the host's rejoin began.
func rejoinSince(p store.Plan) time.Time {
	if since := p.Timeline[store.PhaseRejoining]; !since.IsZero() {
		return since
	}
	return p.PhaseSince
}

// earliestAfter is the earliest of times after now (zero: none).
func earliestAfter(now time.Time, times []time.Time) time.Time {
	var next time.Time
	for _, at := range times {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// Earliest is the earlier of two recheck times, zero meaning never.
func Earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

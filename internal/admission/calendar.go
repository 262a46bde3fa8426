package admission

import (
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// The calendar's part of admission: the operator's pauses of a group or a
// host (each expiring by itself), a node's own opt-out (its Nomad node meta
// rollboot_pause), the groups' windows less their freezes, and the urgent
// requests that skip those windows and freezes. An urgent request skips
// nothing else: not a pause (the operator's explicit word), not a node's
// opt-out, not a safety gate (quorum, capacity, alerts, health gates, the
// workload blockers), which all still apply to it.

// OptOutMetaKey is the Nomad node meta key by which a node's owner holds it
// out of the rollout (`nomad node meta apply rollboot_pause="reason"`).
const OptOutMetaKey = "rollboot_pause"

// calendarHold is why group g's calendar keeps its drains from starting now
// ("" when it does not), and when that may change by itself.
func calendarHold(in Input, g policy.Group) (string, time.Time) {
	ok, why, recheck := g.Calendar().CanStartDrain(in.Now, in.Rules.DrainDeadlineOf(g.Name))
	if ok {
		return "", time.Time{}
	}
	return why, recheck
}

// pauseHold is why an operator's pause holds group g ("" when none does), and
// when it ends by itself (zero: when resumed).
func pauseHold(in Input, g string) (string, time.Time) {
	if in.Paused {
		why := "paused"
		if !in.PauseUntil.IsZero() {
			why += " until " + in.PauseUntil.UTC().Format(time.RFC3339)
		}
		if in.PauseReason != "" {
			why += ": " + in.PauseReason
		}
		return why, in.PauseUntil
	}
	if p, ok := in.GroupPauses[g]; ok && p.InForce(in.Now) {
		return "group " + g + " " + p.Describe(), p.Until
	}
	return "", time.Time{}
}

// hostHolds takes out of the queue the hosts an operator paused one by one and
// those whose node opted out, with why they wait, and when a host pause ends.
func hostHolds(in Input, queue []Pending, out *Result) []Pending {
	if len(in.HostPauses) == 0 && len(in.OptOut) == 0 {
		return queue
	}
	var kept []Pending
	for _, p := range queue {
		if hp, ok := in.HostPauses[p.Host]; ok && hp.InForce(in.Now) {
			out.Wait[p.Host] = phase.WaitFor(phase.WaitHostPaused, hp.Describe())
			out.RecheckAt = phase.Earliest(out.RecheckAt, hp.Until)
			continue
		}
		if why, ok := in.OptOut[p.Host]; ok {
			out.Wait[p.Host] = phase.WaitFor(phase.WaitNodeOptOut, why)
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// calendarRecheck is when a hold of the calendar or a pause on a group with
// hosts queued ends by itself: the pass looks again then rather than at the
// resync.
func calendarRecheck(in Input, statuses []policy.GroupStatus, queue []policy.Request) time.Time {
	var at time.Time
	for _, gs := range statuses {
		if gs.Hold == "" || !slices.ContainsFunc(queue, func(r policy.Request) bool { return r.Group == gs.Group.Name }) {
			continue
		}
		if _, until := pauseHold(in, gs.Group.Name); !until.IsZero() {
			at = phase.Earliest(at, until)
		}
		if _, recheck := calendarHold(in, gs.Group); !recheck.IsZero() {
			at = phase.Earliest(at, recheck)
		}
	}
	return at
}

// urgentRound admits the urgent requests of the groups held only by their
// calendar (a window or a freeze), as if it were open: their slots, the
// groups' budgets and every other rule still apply (accept). The statuses
// are those of the first round, so the hosts it admitted count.
func urgentRound(in Input, statuses []policy.GroupStatus, urgent []policy.Request, firstRound policy.Admission, accept func(policy.Request) bool) policy.Admission {
	admitted := map[string]int{}
	for _, r := range firstRound.Admitted {
		admitted[r.Group]++
	}
	var open []policy.GroupStatus
	for _, gs := range statuses {
		if gs.Hold == "" {
			continue
		}
		if why, _ := pauseHold(in, gs.Group.Name); why != "" {
			continue // an operator's pause holds urgent requests too
		}
		gs.Hold, gs.Active = "", gs.Active+admitted[gs.Group.Name]
		open = append(open, gs)
	}
	return policy.AdmitWith(open, policy.InQueueOrder(urgent), accept)
}

// splitUrgent takes out of queue the urgent requests of groups whose only hold
// is their calendar, for urgentRound.
func splitUrgent(in Input, statuses []policy.GroupStatus, queue []policy.Request) (rest, urgent []policy.Request) {
	if len(in.Urgent) == 0 {
		return queue, nil
	}
	calendarOnly := map[string]bool{}
	for _, gs := range statuses {
		if why, _ := pauseHold(in, gs.Group.Name); gs.Hold != "" && why == "" {
			calendarOnly[gs.Group.Name] = true
		}
	}
	for _, r := range queue {
		if in.Urgent[r.Host] && calendarOnly[r.Group] {
			urgent = append(urgent, r)
			continue
		}
		rest = append(rest, r)
	}
	return rest, urgent
}

// groupHold is the hold of group g: an operator's pause, else its calendar.
func groupHold(in Input, g policy.Group) string {
	if why, _ := pauseHold(in, g.Name); why != "" {
		return why
	}
	why, _ := calendarHold(in, g)
	return why
}

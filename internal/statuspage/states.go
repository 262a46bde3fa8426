package statuspage

import (
	"fmt"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

// Row is what the page says of one host beside its status row: its state,
// the group it is listed in, and the kind of its hold when it is held.
type Row struct {
	State string `json:"state"`
	Group string `json:"group"`
	Hold  string `json:"hold,omitempty"`
}

// HoldOther is the kind of a hold that is not known (a plan of an older
// rollboot, a backoff without a stored reason).
const HoldOther = "other"

// The states of a host, as the page tells them apart: what, if anything, it
// waits for.
const (
	// HostIdle: nothing to do.
	HostIdle = "idle"
	// HostNeeds: it needs a reboot (its agent says so, or someone asked) and
	// no coordinator has planned it yet: only a leader does.
	HostNeeds = "needs_reboot"
	// HostQueued: pending, waiting for its turn in its group.
	HostQueued = "queued"
	// HostHeld: something holds it that an operator may have to act on (a
	// window, a gate, an alert, a backoff, a canceled need): status.Host.Held.
	HostHeld = "held"
	// HostOut: out of service, on its way through its cycle.
	HostOut = "out_of_service"
	// HostStuck: out of service and stuck, or its plan cannot be read.
	HostStuck = "stuck"
)

// hostState is the state of one host.
func hostState(h status.Host) string {
	switch {
	case h.Phase == store.PhaseStuck || h.Phase == store.PhaseUnreadable:
		return HostStuck
	case h.Held:
		return HostHeld
	case (store.Plan{Phase: h.Phase}).Active():
		return HostOut
	case h.Phase == store.PhasePending:
		return HostQueued
	case h.Phase != store.PhaseIdle:
		return HostHeld // a backoff with no stored reason still waits
	case h.RebootRequired || h.ManualRequest:
		return HostNeeds
	}
	return HostIdle
}

// hostStates is every host's state, how many hosts are in each, and how
// many held hosts wait on each kind of hold.
func hostStates(hosts []status.Host) (rows map[string]Row, counts, heldBy map[string]int) {
	rows = make(map[string]Row, len(hosts))
	counts, heldBy = map[string]int{}, map[string]int{}
	for _, h := range hosts {
		r := Row{State: hostState(h)}
		if r.State == HostHeld {
			r.Hold = h.HoldKind
			if r.Hold == "" {
				r.Hold = HoldOther
			}
			heldBy[r.Hold]++
		}
		rows[h.Host] = r
		counts[r.State]++
	}
	return rows, counts, heldBy
}

// The rollout's states, as the page's headline says them.
const (
	RolloutIdle     = "idle"
	RolloutRunning  = "running"
	RolloutHeld     = "held"
	RolloutStuck    = "stuck"
	RolloutPaused   = "paused"
	RolloutFrozen   = "frozen"
	RolloutHalted   = "halted"
	RolloutNoLeader = "no_leader"
	RolloutUnknown  = "unknown"
)

// rollout says whether anything moves and, when nothing does though hosts
// need a reboot, why: no coordinator leads, the rollout is paused, the stored
// policy cannot be used (frozen), every host is held, or the only hosts out
// of service are stuck.
func rollout(v status.View, n map[string]int) (state, headline string) {
	pol := v.Policy
	waiting := n[HostNeeds] + n[HostQueued] + n[HostHeld]
	switch {
	case pol != nil && pol.ReadError != "":
		return RolloutUnknown, "Cannot tell whether a coordinator leads: " + pol.ReadError
	case pol == nil || !pol.Leads():
		if pol != nil && pol.LeaderGone {
			return RolloutNoLeader, "No coordinator leads: " + pol.Leader + " no longer holds the election lock; nothing moves" + needing(waiting)
		}
		return RolloutNoLeader, "No coordinator leads: nothing moves" + needing(waiting)
	case v.Paused:
		why := ""
		if v.PauseReason != "" {
			why = " (" + v.PauseReason + ")"
		}
		lifts := "rollboot resume lifts it"
		if !v.PausedUntil.IsZero() {
			lifts = "it ends by itself at " + v.PausedUntil.UTC().Format(time.RFC3339) + ", or rollboot resume lifts it"
		}
		return RolloutPaused, "Paused" + why + ": no new reboot starts" + needing(waiting) + "; " + lifts
	case pol.Problem != "":
		return RolloutFrozen, "Frozen: the stored policy cannot be used, no new reboot starts" + needing(waiting)
	case len(v.Halts) > 0 || v.HaltProblem != "":
		return RolloutHalted, haltedHeadline(v) + needing(waiting)
	case n[HostOut] == 0 && n[HostStuck] > 0:
		return RolloutStuck, fmt.Sprintf("Stuck: %s, holding their slots (rollboot release HOST frees one)", hostsText(n[HostStuck]))
	case n[HostOut] == 0 && n[HostQueued]+n[HostNeeds] == 0 && n[HostHeld] > 0:
		return RolloutHeld, fmt.Sprintf("Held: every host that needs a reboot waits on a hold (%s); see why on each", hostsText(n[HostHeld]))
	case n[HostOut]+n[HostQueued]+n[HostNeeds] > 0:
		var parts []string
		for _, c := range []struct {
			n    int
			what string
		}{{n[HostOut], "out of service"}, {n[HostQueued] + n[HostNeeds], "queued"}, {n[HostHeld], "held"}, {n[HostStuck], "stuck"}} {
			if c.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
			}
		}
		return RolloutRunning, "Rolling: " + strings.Join(parts, ", ")
	}
	return RolloutIdle, "Idle: no host needs a reboot"
}

// haltedHeadline says which scopes the failure budgets halted, each with its
// failed hosts and the resume that lifts it, or why that cannot be read.
func haltedHeadline(v status.View) string {
	var texts []string
	for _, h := range v.Halts {
		texts = append(texts, h.Text)
	}
	if v.HaltProblem != "" {
		texts = append(texts, v.HaltProblem)
	}
	return "Halted: " + strings.Join(texts, "; ")
}

// needing says how many hosts wait, after a headline that says why nothing moves.
func needing(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s waiting)", hostsText(n))
}

// hostsText is "1 host" or "n hosts".
func hostsText(n int) string {
	if n == 1 {
		return "1 host"
	}
	return fmt.Sprintf("%d hosts", n)
}

// Package notify sends notifications of a rollout's events (a drain started, a
// host rebooting, back in service, stuck, a drain aborted, a failed reboot, the
// rollout paused or resumed, a scope halted, a freeze in force or ended) through
// shoutrrr URLs, from the leading coordinator only, once per event even across
// a change of leader.
//
// Events are not taken from the coordinator's decisions as they are made but
// derived from what it stored (Derive: the plans and the pause flag; the halt
// state; the stored policy's freezes in force at the pass's time), and the
// events sent are recorded in a ledger (Ledger), kept in variables
// <prefix>/notify/<part>: 64 shards of hosts and the pause. So a
// new leader sends what its predecessor stored but did not get to send, and
// nothing that it did send: the one exception is an event whose send finished
// while the ledger write that records it did not (at least once, with a window
// of one send). Sending runs beside the reconcile loop, from a bounded queue with
// a timeout per target: a slow or failing target never slows a pass
// (docs/notifications.md).
package notify

import (
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Kind is the kind of an event.
type Kind string

// The events notified.
const (
	DrainStarted  Kind = "drain_started"
	Rebooting     Kind = "rebooting"
	BackInService Kind = "back_in_service"
	Stuck         Kind = "stuck"
	DrainAborted  Kind = "drain_aborted"
	RebootFailed  Kind = "reboot_failed"
	NodeGone      Kind = "node_gone"
	Paused        Kind = "paused"
	Resumed       Kind = "resumed"
	// AwaitingApproval: a host's turn came in a group that needs an
	// approval, and it awaits one (package admission, approval.go).
	AwaitingApproval Kind = "awaiting_approval"
	// Halted: a failure budget halted a group, or the whole rollout (Group
	// is ""); Error says which hosts failed and how, and what lifts it.
	Halted Kind = "halted"
	// Frozen: a freeze of the policy started to be in force (Freeze, the
	// groups it holds in Group, its end in Until); FreezeEnded: it ended.
	Frozen      Kind = "frozen"
	FreezeEnded Kind = "freeze_ended"
)

// Kinds are every kind of event, in the order of a host's cycle (the
// approval, the halt and the freezes, added later, last).
var Kinds = []Kind{DrainStarted, Rebooting, BackInService, Stuck, DrainAborted, RebootFailed, NodeGone, Paused, Resumed, AwaitingApproval, Halted, Frozen, FreezeEnded}

// ValidKind reports whether k names an event.
func ValidKind(k string) bool { return slices.Contains(Kinds, Kind(k)) }

// Event is one event, as message templates see it.
type Event struct {
	Kind Kind
	Host string // "" for paused, resumed, halted, frozen and freeze_ended
	// Group is the host's group, the group halted, or for frozen and
	// freeze_ended the groups the freeze holds, separated by ", ".
	Group string
	// Grant is the ID of the host's grant (its slot for this reboot); "" for
	// back_in_service (the plan forgets the grant when the cycle ends), paused
	// and resumed.
	Grant string
	// Reason is why the host needs its reboot.
	Reason string
	// Error says what went wrong (stuck, drain_aborted, reboot_failed,
	// node_gone), or, in
	// back_in_service, what workloads were still unhealthy when the slot was
	// freed at the healthy deadline (healthy.on_deadline = "release"; "" when
	// healthy).
	Error string
	// Attempt is the drain attempt of the current request (1 for the first).
	Attempt int
	// PauseReason is the reason given to `rollboot pause`.
	PauseReason string
	// At is when the event happened: the phase's start as the plan records it,
	// the end of the cycle, or the pause.
	At time.Time
	// Duration is the whole cycle, from the grant to back in service (0 when
	// unknown).
	Duration time.Duration
	// Freeze is the freeze's name (frozen, freeze_ended).
	Freeze string
	// Until is when the freeze ends (frozen), or was to end (freeze_ended:
	// At is when it did, earlier when the policy lost it).
	Until time.Time
}

// Halt is a scope the failure budgets halted, as the halt state shows it:
// notified once per scope and time (halted).
type Halt struct {
	Scope string // a group's name, "" for the whole rollout
	Since time.Time
	Text  string
}

// haltEvents are the halted events of the halts.
func haltEvents(halts []Halt) []Event {
	out := make([]Event, 0, len(halts))
	for _, h := range halts {
		out = append(out, Event{Kind: Halted, Group: h.Scope, Error: h.Text, At: h.Since})
	}
	return out
}

// Freeze is an occurrence of a freeze in force, as the coordinator computed it
// from the policy at the pass's time (policy.InForce): notified once per
// occurrence when it starts (frozen) and when it ends (freeze_ended).
type Freeze struct {
	Name       string
	Groups     []string
	Start, End time.Time
}

// freezeEvents are the frozen events of the freezes in force.
func freezeEvents(fs []Freeze) []Event {
	out := make([]Event, 0, len(fs))
	for _, f := range fs {
		out = append(out, Event{Kind: Frozen, Freeze: f.Name, Group: strings.Join(f.Groups, ", "), At: f.Start, Until: f.End})
	}
	return out
}

// freezesEnded returns the freeze_ended events of the freezes that the ledger
// records as notified frozen, not ended, and that are no longer in force at
// the state's time (freezes computed at at): at their end, or at at when the
// policy lost them before it.
func freezesEnded(fs []Freeze, at time.Time, l Ledger) []Event {
	if at.IsZero() {
		return nil // the freezes in force are not known
	}
	var out []Event
	names := make([]string, 0, len(l.Freezes))
	for name := range l.Freezes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := l.Freezes[name]
		if f.Ended || slices.ContainsFunc(fs, func(x Freeze) bool { return x.Name == name && x.Start.Equal(f.Start) }) {
			continue
		}
		end := f.Until
		if at.Before(end) {
			end = at
		}
		out = append(out, Event{Kind: FreezeEnded, Freeze: name, Group: f.Groups, At: end, Until: f.Until})
	}
	return out
}

// Pause is the pause flag as the control state shows it.
type Pause struct {
	Paused bool
	At     time.Time
	Reason string
}

// notRebooted is how the coordinator's plan says that a host reported a failed
// reboot attempt (coordinator.notRebooted sets LastError so): its backoff is a
// failed reboot, any other backoff with a grant an aborted drain.
const notRebooted = "the host did not reboot: "

// Derive returns the events that the stored plans and pause flag imply and that
// the ledger does not record as sent, in order: by host (in the order of plans),
// each host's in the order of its cycle, then the pause or resume. It is pure:
// the same state and ledger give the same events.
//
// What a plan implies (Implied):
//   - a grant with a node in draining, drained, rebooting, rejoining or stuck:
//     drain_started (a host without a Nomad node has no drain);
//   - rebooting or rejoining: rebooting;
//   - stuck: stuck;
//   - backoff with a grant: reboot_failed when the host reported a failed attempt,
//     node_gone when its slot was released because its node was gone,
//     drain_aborted otherwise;
//   - pending and awaiting approval (AwaitingSince): awaiting_approval, once
//     per AwaitingSince, with what approves it as its Error;
//   - idle after a finished reboot (LastCompleted): back_in_service, once per
//     LastCompleted, with the workloads still unhealthy (LastUnhealthy) as its
//     Error.
//
// Each host event is keyed by the grant it belongs to (grant IDs are never
// reused), back_in_service by its LastCompleted, and paused and resumed by the
// time of the pause: an event is sent once, however many passes see its state.
func Derive(plans []store.Plan, pause Pause, l Ledger) []Event {
	var out []Event
	for _, e := range Implied(plans, pause) {
		if !l.Sent(e) {
			out = append(out, e)
		}
	}
	if r, ok := resumed(pause, l); ok {
		out = append(out, r)
	}
	return out
}

// Implied returns the events the plans and the pause flag imply, whether sent
// or not (Derive), but for resumed, which depends on the pause notified.
func Implied(plans []store.Plan, pause Pause) []Event {
	var out []Event
	for _, p := range plans {
		out = append(out, implied(p)...)
	}
	if pause.Paused {
		out = append(out, Event{Kind: Paused, PauseReason: pause.Reason, At: pause.At})
	}
	return out
}

// implied returns the events the plan implies, in cycle order.
func implied(p store.Plan) []Event {
	ev := func(k Kind, at time.Time) Event {
		e := Event{Kind: k, Host: p.Host, Group: p.Group, Grant: p.GrantID, Reason: p.Reason, Attempt: p.Attempt, At: at}
		switch k {
		case Stuck, DrainAborted:
			e.Error = p.LastError
		case RebootFailed:
			e.Error = strings.TrimPrefix(p.LastError, notRebooted)
		case NodeGone:
			e.Error = strings.TrimPrefix(p.LastError, store.NodeGonePrefix)
		}
		return e
	}
	// The timeline keeps the first entry of each phase for the whole request: a
	// retry's own entry into its current phase is PhaseSince.
	since := func(phase string) time.Time {
		if p.Phase == phase {
			return p.PhaseSince
		}
		return p.Timeline[phase]
	}
	var out []Event
	switch p.Phase {
	case store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining, store.PhaseStuck:
		if p.GrantID == "" {
			return nil
		}
		if p.NodeID != "" {
			out = append(out, ev(DrainStarted, since(store.PhaseDraining)))
		}
		switch p.Phase {
		case store.PhaseRebooting, store.PhaseRejoining:
			out = append(out, ev(Rebooting, since(store.PhaseRebooting)))
		case store.PhaseStuck:
			out = append(out, ev(Stuck, p.PhaseSince))
		}
	case store.PhaseBackoff:
		if p.GrantID == "" {
			return nil
		}
		switch {
		case strings.HasPrefix(p.LastError, notRebooted):
			out = append(out, ev(RebootFailed, p.PhaseSince))
		case strings.HasPrefix(p.LastError, store.NodeGonePrefix):
			out = append(out, ev(NodeGone, p.PhaseSince))
		default:
			out = append(out, ev(DrainAborted, p.PhaseSince))
		}
	case store.PhasePending:
		if !p.AwaitingSince.IsZero() {
			e := ev(AwaitingApproval, p.AwaitingSince)
			e.Grant, e.Error = "", strings.TrimPrefix(p.Waiting, "awaiting approval: ")
			out = append(out, e)
		}
	case store.PhaseIdle:
		if p.LastCompleted.IsZero() {
			return nil
		}
		e := ev(BackInService, p.LastCompleted)
		e.Grant, e.Error, e.Attempt = "", p.LastUnhealthy, 0
		if start := p.Timeline[store.PhaseDraining]; !start.IsZero() && start.Before(p.LastCompleted) {
			e.Duration = p.LastCompleted.Sub(start)
		}
		out = append(out, e)
	}
	return out
}

// resumed returns the resume of the last pause notified, once the flag is
// cleared.
func resumed(pause Pause, l Ledger) (Event, bool) {
	if pause.Paused || !l.Pause.Paused || l.Pause.Resumed {
		return Event{}, false
	}
	return Event{Kind: Resumed, At: l.Pause.At}, true
}

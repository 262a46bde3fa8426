// Package statuspage serves the read-only status page of a rollout: the groups
// with their slots, every host's phase and why it waits, the leader, and the
// rollout timeline (a Gantt chart of each host's drain, reboot and rejoin), kept
// live with Server-Sent Events. Its data is the status view that `rollboot
// status -json` prints (internal/status) plus the history of finished cycles;
// Build turns them into the page's model, a pure function.
package statuspage

import (
	"sort"
	"time"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

// Page is what the page shows, as /api/status serves it.
type Page struct {
	// Now is the server's time, in Unix milliseconds: the page draws the open
	// bars up to it and corrects for its own clock.
	Now int64 `json:"now"`
	// Process says which process serves the page; Leader whether it leads
	// (LeaderThis, LeaderOther, LeaderUnknown).
	Process string `json:"process,omitempty"`
	Leader  string `json:"leader"`
	// Rollout is whether anything moves (one of the Rollout* values) and
	// Headline says it in words, with why not: the page's title line.
	Rollout  string `json:"rollout"`
	Headline string `json:"headline"`
	// Counts is how many hosts are in each state (the Host* values), and
	// Rows each host's state and the group the page lists it in, by host name.
	Counts map[string]int `json:"counts"`
	Rows   map[string]Row `json:"rows"`
	// HeldBy counts the held hosts by the kind of their hold (HoldOther
	// where it is not known).
	HeldBy map[string]int `json:"held_by"`
	// Coordinator is the leading coordinator as it last said, and Policy which
	// policy applies (status.Policy.Text).
	Coordinator string `json:"coordinator"`
	Policy      string `json:"policy"`
	// Error is why the state could not be read this time (the page keeps
	// showing what it had).
	Error    string      `json:"error,omitempty"`
	Status   status.View `json:"status"`
	Groups   []Group     `json:"groups"`
	Timeline []Cycle     `json:"timeline"`
}

// Group is one group's summary.
type Group struct {
	Name   string         `json:"name"`
	Hosts  int            `json:"hosts"`
	Phases map[string]int `json:"phases"`
	// States counts the group's hosts in each state (the Host* values).
	States map[string]int `json:"states"`
	// SlotsUsed are the group's hosts out of service (draining to rejoining,
	// and stuck); SlotsLimit how many may be, as the leader last computed it
	// and recorded (absent until it has: store.Enforcement.Slots).
	SlotsUsed  int  `json:"slots_used"`
	SlotsLimit *int `json:"slots_limit,omitempty"`
}

// Cycle is one reboot cycle of a host on the timeline: finished (from the
// history) or under way (from its plan, Open, drawn up to now).
type Cycle struct {
	Host    string `json:"host"`
	Group   string `json:"group,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Open    bool   `json:"open,omitempty"`
	Bars    []Bar  `json:"bars"`
}

// Bar is one stretch of a cycle, in Unix milliseconds; End is 0 on the open
// bar of a cycle under way.
type Bar struct {
	Kind  string `json:"kind"`
	Start int64  `json:"start"`
	End   int64  `json:"end,omitempty"`
}

// The kinds of bars: a host waits (pending, or backing off after a failed
// drain), drains (draining), reboots (from its drain completing to the host
// being seen back: the agent's hooks and delay, the reboot itself), rejoins
// (until the slot is freed), or is stuck.
const (
	KindWait    = "wait"
	KindBackoff = "backoff"
	KindDrain   = "drain"
	KindReboot  = "reboot"
	KindRejoin  = "rejoin"
	KindStuck   = "stuck"
)

// kindOf maps the phases of a plan's timeline to bars; idle ends a cycle.
var kindOf = map[string]string{
	store.PhasePending:   KindWait,
	store.PhaseBackoff:   KindBackoff,
	store.PhaseDraining:  KindDrain,
	store.PhaseDrained:   KindReboot,
	store.PhaseRebooting: KindReboot,
	store.PhaseRejoining: KindRejoin,
	store.PhaseStuck:     KindStuck,
}

// phaseOrder breaks ties between phases entered at the same instant.
var phaseOrder = map[string]int{
	store.PhasePending: 0, store.PhaseBackoff: 1, store.PhaseDraining: 2, store.PhaseDrained: 3,
	store.PhaseRebooting: 4, store.PhaseStuck: 5, store.PhaseRejoining: 6,
}

// Input is what Build takes.
type Input struct {
	Now     time.Time
	Process string
	Leader  string
	View    status.View
	History []store.HistoryRecord
}

// NoGroup names the hosts that are in no group of the policy as far as the
// page knows: never placed in one by a plan (never requested), or last placed
// in a group the policy no longer has.
const NoGroup = "(not placed yet)"

// Build is the page of the view and the history at now.
func Build(in Input) Page {
	p := Page{Now: in.Now.UnixMilli(), Process: in.Process, Leader: in.Leader, Status: in.View,
		Coordinator: "none has said yet", Policy: "unknown"}
	var slots map[string]int
	if pol := in.View.Policy; pol != nil {
		p.Policy = pol.Text()
		if pol.Leader != "" {
			p.Coordinator = pol.Coordinator()
		}
		slots = pol.Slots
	}
	p.Rows, p.Counts, p.HeldBy = hostStates(in.View.Hosts)
	p.Rollout, p.Headline = rollout(pauseInForce(in.View, in.Now), p.Counts)
	p.Groups = groups(in.View.Hosts, slots, p.Rows)
	p.Timeline = timeline(in.View.Hosts, in.History)
	return p
}

// groups are the groups of the hosts and of the leader's slot limits (every
// group of the policy it enforces, once it said so). A host idle in a group
// that is not among them (a group since removed from the policy) is listed
// under NoGroup: the removed group is gone from the page.
func groups(hosts []status.Host, limits map[string]int, rows map[string]Row) []Group {
	byName := map[string]*Group{}
	for name, n := range limits {
		byName[name] = &Group{Name: name, Phases: map[string]int{}, States: map[string]int{}, SlotsLimit: &n}
	}
	for _, h := range hosts {
		name := h.Group
		if _, known := limits[name]; name == "" || limits != nil && !known && h.Phase == store.PhaseIdle {
			name = NoGroup
		}
		g := byName[name]
		if g == nil {
			g = &Group{Name: name, Phases: map[string]int{}, States: map[string]int{}}
			byName[name] = g
		}
		g.Hosts++
		g.Phases[h.Phase]++
		r := rows[h.Host]
		r.Group = name
		rows[h.Host] = r
		g.States[r.State]++
		if (store.Plan{Phase: h.Phase}).Active() {
			g.SlotsUsed++
		}
	}
	out := make([]Group, 0, len(byName))
	for _, g := range byName {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// timeline is every finished cycle of the history and every cycle under way,
// by host, oldest first. A cycle whose history record is written while its
// plan still shows it (the history is written first) is drawn once.
func timeline(hosts []status.Host, hist []store.HistoryRecord) []Cycle {
	out := []Cycle{}
	finished := map[string]bool{}
	for _, r := range hist {
		finished[cycleKey(r.Host, r.Timeline)] = true
		end := r.Finished
		if at, ok := r.Timeline[store.PhaseIdle]; ok {
			end = at
		}
		if bars := bars(r.Timeline, end); len(bars) > 0 {
			out = append(out, Cycle{Host: r.Host, Group: r.Group, Outcome: r.Outcome, Bars: bars})
		}
	}
	for _, h := range hosts {
		if len(h.Timeline) == 0 || finished[cycleKey(h.Host, h.Timeline)] {
			continue
		}
		if bars := bars(h.Timeline, time.Time{}); len(bars) > 0 {
			out = append(out, Cycle{Host: h.Host, Group: h.Group, Open: true, Bars: bars})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].Bars[0].Start < out[j].Bars[0].Start
	})
	return out
}

func cycleKey(host string, tl map[string]time.Time) string {
	return host + "@" + tl[store.PhasePending].UTC().Format(time.RFC3339Nano)
}

// bars cuts a cycle's timeline (the first entry of each phase) into bars, each
// phase lasting until the next one entered; the last lasts until end (zero:
// open). Neighbours of the same kind merge.
func bars(tl map[string]time.Time, end time.Time) []Bar {
	type mark struct {
		phase string
		at    time.Time
	}
	var marks []mark
	for ph, at := range tl {
		if _, ok := kindOf[ph]; ok && !at.IsZero() {
			marks = append(marks, mark{ph, at})
		}
	}
	sort.Slice(marks, func(i, j int) bool {
		if !marks[i].at.Equal(marks[j].at) {
			return marks[i].at.Before(marks[j].at)
		}
		return phaseOrder[marks[i].phase] < phaseOrder[marks[j].phase]
	})
	var out []Bar
	for i, m := range marks {
		b := Bar{Kind: kindOf[m.phase], Start: m.at.UnixMilli()}
		switch {
		case i+1 < len(marks):
			b.End = marks[i+1].at.UnixMilli()
		case !end.IsZero():
			b.End = max(end.UnixMilli(), b.Start)
		}
		if n := len(out); n > 0 && out[n-1].Kind == b.Kind {
			out[n-1].End = b.End
			continue
		}
		out = append(out, b)
	}
	return out
}

// pauseInForce is v without its rollout-wide pause once that has ended by
// itself: the coordinator ignores it.
func pauseInForce(v status.View, now time.Time) status.View {
	if v.Paused && !v.PausedUntil.IsZero() && !now.Before(v.PausedUntil) {
		v.Paused = false
	}
	return v
}

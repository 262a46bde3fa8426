// Package wave decides the order of a wave, the hosts of a group that need a
// reboot for the same thing (the same fingerprint): its canaries go first and
// the rest wait until they have been back and healthy for the group's soak,
// and a group that follows others starts a wave only when they finished it and
// soaked. Pure: the coordinator observes, stores the State it returns in
// <prefix>/waves and asks for the holds.
package wave

import (
	"fmt"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// GroupRules are one group's wave settings.
type GroupRules struct {
	// Canaries is how many hosts of each wave go first (0: none); Soak how
	// long the last of them must have been back before the rest start.
	Canaries int
	Soak     time.Duration
	// After are the groups that must have finished a wave, and AfterSoak is
	// how long before, for this group to start it.
	After     []string
	AfterSoak time.Duration
}

// Rules are the groups' wave settings, by group name; a group missing has none.
type Rules map[string]GroupRules

// Tracked reports whether the waves of group are tracked: it has canaries,
// follows a group, or is followed.
func (r Rules) Tracked(group string) bool {
	if g := r[group]; g.Canaries > 0 || len(g.After) > 0 {
		return true
	}
	for _, g := range r {
		if slices.Contains(g.After, group) {
			return true
		}
	}
	return false
}

// Enabled reports whether any group has canaries or follows another.
func (r Rules) Enabled() bool {
	for _, g := range r {
		if g.Canaries > 0 || len(g.After) > 0 {
			return true
		}
	}
	return false
}

// Member is a host granted in a wave: a canary (kept with its verdict), or
// another host while its cycle runs (forgotten, counted in Completed, once it
// ends).
type Member struct {
	Host   string    `json:"host"`
	At     time.Time `json:"at"` // granted
	Canary bool      `json:"canary,omitempty"`
	// Done: when a canary came back healthy (zero: not yet).
	Done time.Time `json:"done,omitzero"`
}

// Wave is one fingerprint in one group.
type Wave struct {
	Group       string    `json:"group"`
	Fingerprint string    `json:"fingerprint"`
	Seen        time.Time `json:"seen"` // a host of the group first waited in it
	Members     []Member  `json:"members,omitempty"`
	// Completed counts the cycles of hosts other than canaries that came back
	// healthy in the wave.
	Completed int `json:"completed,omitempty"`
	// Finished: no host of the group needs the fingerprint any more, none is
	// out in the wave, and at least one came back healthy (zero: not yet).
	Finished time.Time `json:"finished,omitzero"`
	// Failed: a canary failed, how; the rest of the wave is held (FailedAt: when
	// it was seen).
	Failed   string    `json:"failed,omitempty"`
	FailedAt time.Time `json:"failed_at,omitzero"`
}

// Name is how the wave is named in reasons.
func (w Wave) Name() string { return fmt.Sprintf("wave %s of group %q", Short(w.Fingerprint), w.Group) }

// Short is a fingerprint cut to 16 characters for reasons and tables.
func Short(fp string) string {
	if len(fp) > 16 {
		return fp[:16]
	}
	return fp
}

// canaries returns the wave's canaries.
func (w Wave) canaries() []Member {
	var out []Member
	for _, m := range w.Members {
		if m.Canary {
			out = append(out, m)
		}
	}
	return out
}

// State is every wave remembered, sorted by group then fingerprint.
type State struct {
	Waves []Wave
}

// find returns the index of the wave of group and fp, or -1.
func (s State) find(group, fp string) int {
	return slices.IndexFunc(s.Waves, func(w Wave) bool { return w.Group == group && w.Fingerprint == fp })
}

// Wave returns the wave of group and fp, if remembered.
func (s State) Wave(group, fp string) (Wave, bool) {
	if i := s.find(group, fp); i >= 0 {
		return s.Waves[i], true
	}
	return Wave{}, false
}

// clone returns a deep copy of s.
func (s State) clone() State {
	out := State{Waves: slices.Clone(s.Waves)}
	for i := range out.Waves {
		out.Waves[i].Members = slices.Clone(out.Waves[i].Members)
	}
	return out
}

// Equal reports whether s and o remember the same.
func (s State) Equal(o State) bool {
	return slices.EqualFunc(s.Waves, o.Waves, func(a, b Wave) bool {
		return a.Group == b.Group && a.Fingerprint == b.Fingerprint && a.Seen.Equal(b.Seen) &&
			a.Completed == b.Completed && a.Finished.Equal(b.Finished) && a.Failed == b.Failed &&
			a.FailedAt.Equal(b.FailedAt) && slices.EqualFunc(a.Members, b.Members, func(x, y Member) bool {
			return x.Host == y.Host && x.At.Equal(y.At) && x.Canary == y.Canary && x.Done.Equal(y.Done)
		})
	})
}

// Host is what a pass observed of one host: its group (from Nomad), the
// fingerprint its record claims for its need ("" when it claims none: such a
// host is in no wave), and its plan.
type Host struct {
	Name        string
	Group       string
	Fingerprint string
	Plan        store.Plan
}

// pendingIn reports whether h waits to start in a wave.
func (h Host) pendingIn() bool { return h.Fingerprint != "" && h.Plan.Phase == store.PhasePending }

// Failure is a canary that failed, for the group's halt.
type Failure struct {
	Group, Fingerprint, Host, Reason string
}

// String says which canary failed and how.
func (f Failure) String() string {
	return fmt.Sprintf("canary %s of wave %s failed: %s", f.Host, Short(f.Fingerprint), f.Reason)
}

// keep is how many waves are remembered at most; the oldest finished, then the
// oldest seen, are forgotten first.
const keep = 64

// byName orders hosts by name.
func byName(hosts []Host) map[string]Host {
	out := make(map[string]Host, len(hosts))
	for _, h := range hosts {
		out[h.Name] = h
	}
	return out
}

// reason builds a wait reason.
func reason(k phase.WaitKind, format string, args ...any) phase.WaitReason {
	return phase.WaitFor(k, fmt.Sprintf(format, args...))
}

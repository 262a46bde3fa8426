package preview

import (
	"cmp"
	"slices"
	"time"
)

// Change is how one host's part of the rollout differs between two plans. A
// host absent from a plan (nothing to do for it there) has an empty Group on
// that side.
type Change struct {
	Host           string    `json:"host"`
	GroupBefore    string    `json:"group_before,omitempty"`
	GroupAfter     string    `json:"group_after,omitempty"`
	PositionBefore int       `json:"position_before,omitempty"`
	PositionAfter  int       `json:"position_after,omitempty"`
	StartBefore    time.Time `json:"start_before,omitzero"`
	StartAfter     time.Time `json:"start_after,omitzero"`
	FinishBefore   time.Time `json:"finish_before,omitzero"`
	FinishAfter    time.Time `json:"finish_after,omitzero"`
	ReasonBefore   string    `json:"reason_before,omitempty"`
	ReasonAfter    string    `json:"reason_after,omitempty"`
}

// Comparison is how a candidate policy's plan differs from the plan in force.
type Comparison struct {
	Changes []Change `json:"changes"` // by host name
	// The whole rollout's estimated finish, and how many hosts had none.
	FinishBefore      time.Time `json:"finish_before,omitzero"`
	FinishAfter       time.Time `json:"finish_after,omitzero"`
	UnestimatedBefore int       `json:"unestimated_before"`
	UnestimatedAfter  int       `json:"unestimated_after"`
}

// Tolerance is how much an estimate may move before it counts as a change:
// the two plans are read one after the other.
const Tolerance = time.Second

// Diff compares the plan under a candidate policy (after) with the plan under
// the policy in force (before): the hosts whose group, place in the queue,
// estimated start or finish, or reason to wait change, and the whole rollout's
// finish.
func Diff(before, after Plan) Comparison {
	b, a := hostsOf(before), hostsOf(after)
	names := map[string]bool{}
	for n := range b {
		names[n] = true
	}
	for n := range a {
		names[n] = true
	}
	c := Comparison{FinishBefore: before.Finish, FinishAfter: after.Finish,
		UnestimatedBefore: before.Unestimated, UnestimatedAfter: after.Unestimated}
	for n := range names {
		hb, ha := b[n], a[n]
		ch := Change{Host: n, GroupBefore: hb.Group, GroupAfter: ha.Group,
			PositionBefore: hb.Position, PositionAfter: ha.Position,
			StartBefore: hb.Start, StartAfter: ha.Start, FinishBefore: hb.Finish, FinishAfter: ha.Finish,
			ReasonBefore: hb.Reason, ReasonAfter: ha.Reason}
		if ch.changed() {
			c.Changes = append(c.Changes, ch)
		}
	}
	slices.SortFunc(c.Changes, func(x, y Change) int { return cmp.Compare(x.Host, y.Host) })
	return c
}

func (ch Change) changed() bool {
	return ch.GroupBefore != ch.GroupAfter || ch.PositionBefore != ch.PositionAfter ||
		moved(ch.StartBefore, ch.StartAfter) || moved(ch.FinishBefore, ch.FinishAfter) ||
		ch.ReasonBefore != ch.ReasonAfter
}

// moved reports whether an estimate changed: one side has none, or they are
// further apart than Tolerance.
func moved(x, y time.Time) bool {
	if x.IsZero() || y.IsZero() {
		return x.IsZero() != y.IsZero()
	}
	d := x.Sub(y)
	return d > Tolerance || d < -Tolerance
}

// FinishMoved reports whether the whole rollout's finish changes.
func (c Comparison) FinishMoved() bool {
	return moved(c.FinishBefore, c.FinishAfter) || c.UnestimatedBefore != c.UnestimatedAfter
}

func hostsOf(p Plan) map[string]Host {
	out := map[string]Host{}
	for _, g := range p.Groups {
		for _, h := range g.Hosts {
			out[h.Host] = h
		}
	}
	return out
}

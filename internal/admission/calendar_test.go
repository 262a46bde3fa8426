package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// The calendar's holds: freezes and windows hold a group and are looked at
// again when they end; pauses (rollout, group, host) end by themselves; a
// node's opt-out holds its host alone; an urgent request skips windows and
// freezes but not a pause nor another rule.
func TestCalendarHolds(t *testing.T) {
	// now is 2026-12-02 10:00 UTC.
	freeze := policy.Freeze{Name: "year-end", From: policy.Date{Month: 12, Day: 1}, To: policy.Date{Month: 12, Day: 3}}
	frozenUntil := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	night := policy.Schedule{{Name: "night", Days: []time.Weekday{time.Wednesday}, Start: 22 * time.Hour, End: 23 * time.Hour}}
	withGroup := func(f func(g *policy.Group), queue ...Pending) Input {
		in := input(2, queue...)
		f(&in.Rules.Groups[0])
		return in
	}
	noGroupChange := func(*policy.Group) {}
	frozen := func(g *policy.Group) { g.Freezes = policy.Freezes{freeze} }
	windowed := func(g *policy.Group) { g.Schedule = night }
	urgent := func(in Input, hosts ...string) Input {
		in.Urgent = map[string]bool{}
		for _, h := range hosts {
			in.Urgent[h] = true
		}
		return in
	}
	tests := []struct {
		name     string
		in       Input
		admitted []string
		wait     map[string]string // host -> a part of its reason
		recheck  time.Time
	}{
		{name: "frozen: held, looked at again at the end", in: withGroup(frozen, pending("a", 0)),
			wait: map[string]string{"a": "frozen until 2026-12-04T00:00:00Z (year-end)"}, recheck: frozenUntil},
		{name: "window closed: looked at again when it opens", in: withGroup(windowed, pending("a", 0)),
			wait: map[string]string{"a": "outside the maintenance windows"}, recheck: time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)},
		{name: "urgent skips the freeze", in: urgent(withGroup(frozen, pending("a", 0), pending("b", time.Minute)), "b"),
			admitted: []string{"b"}, wait: map[string]string{"a": "frozen until"}, recheck: frozenUntil},
		{name: "urgent skips a closed window", in: urgent(withGroup(windowed, pending("a", 0)), "a"), admitted: []string{"a"},
			recheck: time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)},
		{name: "urgent keeps to the group's slots", in: func() Input {
			in := urgent(withGroup(windowed, pending("a", 0)), "a")
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, Active: 2}
			return in
		}(), wait: map[string]string{"a": "waiting for a slot"}, recheck: time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)},
		{name: "urgent does not skip a rollout pause", in: func() Input {
			in := urgent(withGroup(frozen, pending("a", 0)), "a")
			in.Paused, in.PauseReason, in.PauseUntil = true, "incident", now.Add(time.Hour)
			return in
		}(), wait: map[string]string{"a": "paused until 2026-12-02T11:00:00Z: incident"}, recheck: now.Add(time.Hour)},
		{name: "group pause in force", in: func() Input {
			in := withGroup(noGroupChange, pending("a", 0))
			in.GroupPauses = map[string]store.Pause{policy.DefaultGroupName: {Until: now.Add(time.Minute), Reason: "db migration", By: "ops"}}
			return in
		}(), wait: map[string]string{"a": "group default paused until 2026-12-02T10:01:00Z by ops: db migration"}, recheck: now.Add(time.Minute)},
		{name: "group pause expired: ignored", in: func() Input {
			in := withGroup(noGroupChange, pending("a", 0))
			in.GroupPauses = map[string]store.Pause{policy.DefaultGroupName: {Until: now, Reason: "over"}}
			return in
		}(), admitted: []string{"a"}},
		{name: "host pause holds that host only", in: func() Input {
			in := withGroup(noGroupChange, pending("a", 0), pending("b", time.Minute))
			in.HostPauses = map[string]store.Pause{"a": {Until: now.Add(time.Hour), Reason: "debugging"}}
			return in
		}(), admitted: []string{"b"}, wait: map[string]string{"a": "paused until 2026-12-02T11:00:00Z: debugging"}, recheck: now.Add(time.Hour)},
		{name: "node opt-out holds that host only, urgent or not", in: func() Input {
			in := urgent(withGroup(noGroupChange, pending("a", 0), pending("b", time.Minute)), "a")
			in.OptOut = map[string]string{"a": "benchmark running"}
			return in
		}(), admitted: []string{"b"}, wait: map[string]string{"a": "its node opted out (node meta rollboot_pause): benchmark running"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, needs := Admit(tc.in)
			if !needs.None() {
				t.Fatalf("needs %+v", needs)
			}
			for _, h := range tc.admitted {
				if !res.Admitted[h] {
					t.Errorf("%s not admitted (waits: %v)", h, res.Wait[h])
				}
			}
			if len(res.Admitted) != len(tc.admitted) {
				t.Errorf("admitted %v, want %v", res.Admitted, tc.admitted)
			}
			for h, part := range tc.wait {
				if got := res.Wait[h].String(); !strings.Contains(got, part) {
					t.Errorf("%s waits %q, want it to say %q", h, got, part)
				}
			}
			if !res.RecheckAt.Equal(tc.recheck) {
				t.Errorf("RecheckAt = %v, want %v", res.RecheckAt, tc.recheck)
			}
		})
	}
}

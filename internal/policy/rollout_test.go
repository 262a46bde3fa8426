package policy

import (
	"testing"
	"time"
)

func TestRolloutHold(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	ago := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, now.Add(-d))
		}
		return out
	}
	tests := []struct {
		name   string
		b      RolloutBudget
		out    int
		starts []time.Time
		why    string
		until  time.Time
	}{
		{name: "no cap", out: 50, starts: ago(time.Minute)},
		{name: "max_out with room", b: RolloutBudget{MaxOut: 3}, out: 2},
		{name: "max_out full", b: RolloutBudget{MaxOut: 3}, out: 3, why: "rollout max_out: 3 of 3 hosts out"},
		{name: "max_out over (a policy lowered it)", b: RolloutBudget{MaxOut: 2}, out: 3, why: "rollout max_out: 3 of 2 hosts out"},
		{name: "drain rate with room, old starts ignored", b: RolloutBudget{MaxDrainsPerHour: 2}, starts: ago(time.Minute, time.Hour, 2*time.Hour)},
		{name: "drain rate used up: the next when the oldest of the last two is an hour old", b: RolloutBudget{MaxDrainsPerHour: 2},
			starts: ago(10*time.Minute, 40*time.Minute, 5*time.Minute), until: now.Add(-10 * time.Minute).Add(time.Hour),
			why: "rollout max_drains_per_hour: 3 drains started in the last hour, of 2; the next may start at 2026-12-06T10:50:00Z"},
		{name: "both, max_out holds first", b: RolloutBudget{MaxOut: 2, MaxDrainsPerHour: 1}, out: 2, starts: ago(time.Minute),
			why: "rollout max_out: 2 of 2 hosts out"},
		{name: "both, the rate holds", b: RolloutBudget{MaxOut: 5, MaxDrainsPerHour: 1}, out: 1, starts: ago(time.Minute),
			until: now.Add(59 * time.Minute),
			why:   "rollout max_drains_per_hour: 1 drains started in the last hour, of 1; the next may start at 2026-12-06T10:59:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, until := tt.b.Hold(tt.out, tt.starts, now)
			if why != tt.why || !until.Equal(tt.until) {
				t.Errorf("Hold = %q, %v; want %q, %v", why, until, tt.why, tt.until)
			}
		})
	}
}

func TestRecentStarts(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	got := RecentStarts([]time.Time{now.Add(-2 * time.Hour), now.Add(-time.Hour), now.Add(-time.Minute)}, now)
	if len(got) != 2 || !got[0].Equal(now.Add(-time.Minute)) || !got[1].Equal(now) {
		t.Errorf("RecentStarts = %v", got)
	}
}

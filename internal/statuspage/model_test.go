package statuspage

import (
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

var t0 = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
func ms(sec int) int64     { return at(sec).UnixMilli() }

func TestBars(t *testing.T) {
	tests := []struct {
		name string
		tl   map[string]time.Time
		end  time.Time
		want []Bar
	}{
		{
			name: "a whole cycle: drained and rebooting are one reboot bar",
			tl: map[string]time.Time{store.PhasePending: at(0), store.PhaseDraining: at(2), store.PhaseDrained: at(5),
				store.PhaseRebooting: at(6), store.PhaseRejoining: at(9), store.PhaseIdle: at(12)},
			end:  at(12),
			want: []Bar{{KindWait, ms(0), ms(2)}, {KindDrain, ms(2), ms(5)}, {KindReboot, ms(5), ms(9)}, {KindRejoin, ms(9), ms(12)}},
		},
		{
			name: "under way: the last bar is open",
			tl:   map[string]time.Time{store.PhasePending: at(0), store.PhaseDraining: at(2)},
			want: []Bar{{KindWait, ms(0), ms(2)}, {KindDrain, ms(2), 0}},
		},
		{
			name: "phases entered at the same instant keep their order (an instant drain)",
			tl: map[string]time.Time{store.PhaseDrained: at(3), store.PhaseDraining: at(3), store.PhasePending: at(0),
				store.PhaseRejoining: at(4)},
			end:  at(7),
			want: []Bar{{KindWait, ms(0), ms(3)}, {KindDrain, ms(3), ms(3)}, {KindReboot, ms(3), ms(4)}, {KindRejoin, ms(4), ms(7)}},
		},
		{
			name: "a stuck host that came back late",
			tl: map[string]time.Time{store.PhasePending: at(0), store.PhaseDraining: at(1), store.PhaseDrained: at(2),
				store.PhaseStuck: at(30), store.PhaseRejoining: at(40)},
			end: at(45),
			want: []Bar{{KindWait, ms(0), ms(1)}, {KindDrain, ms(1), ms(2)}, {KindReboot, ms(2), ms(30)},
				{KindStuck, ms(30), ms(40)}, {KindRejoin, ms(40), ms(45)}},
		},
		{
			name: "a failed drain backs off",
			tl:   map[string]time.Time{store.PhasePending: at(0), store.PhaseDraining: at(1), store.PhaseBackoff: at(21)},
			end:  at(22),
			want: []Bar{{KindWait, ms(0), ms(1)}, {KindDrain, ms(1), ms(21)}, {KindBackoff, ms(21), ms(22)}},
		},
		{
			name: "unknown phases and zero times are left out",
			tl:   map[string]time.Time{store.PhasePending: at(0), store.PhaseUnreadable: at(1), store.PhaseDraining: {}},
			end:  at(2),
			want: []Bar{{KindWait, ms(0), ms(2)}},
		},
		{name: "nothing", tl: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bars(tt.tl, tt.end); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("bars = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	cycle := map[string]time.Time{store.PhasePending: at(0), store.PhaseDraining: at(1), store.PhaseDrained: at(2),
		store.PhaseRejoining: at(3)}
	view := status.View{Hosts: []status.Host{
		{Host: "a", Group: "web", Phase: store.PhaseRejoining, Timeline: cycle}, // its history is written already
		{Host: "b", Group: "web", Phase: store.PhaseDraining, Timeline: map[string]time.Time{store.PhasePending: at(5), store.PhaseDraining: at(6)}},
		{Host: "c", Group: "web", Phase: store.PhasePending, Timeline: map[string]time.Time{store.PhasePending: at(7)}},
		{Host: "d", Phase: store.PhaseIdle},
		{Host: "e", Group: "batch", Phase: store.PhaseStuck, Timeline: map[string]time.Time{store.PhasePending: at(1), store.PhaseStuck: at(9)}},
		{Host: "f", Group: "removed", Phase: store.PhaseIdle}, // last placed in a group the policy no longer has
	}, Policy: &status.Policy{Leader: "c1", Slots: map[string]int{"web": 2, "empty": 1}}}
	done := map[string]time.Time{}
	for k, v := range cycle {
		done[k] = v
	}
	done[store.PhaseIdle] = at(4)
	hist := []store.HistoryRecord{
		{Host: "a", Group: "web", Outcome: "rebooted", Timeline: done, Finished: at(4)},
		{Host: "a", Group: "web", Outcome: "released", Timeline: map[string]time.Time{store.PhasePending: at(-9)}, Finished: at(-8)},
	}
	p := Build(Input{Now: at(10), Process: "host-1", Leader: LeaderThis, View: view, History: hist})

	two, one := 2, 1
	wantGroups := []Group{
		{Name: NoGroup, Hosts: 2, Phases: map[string]int{store.PhaseIdle: 2}, States: map[string]int{HostIdle: 2}},
		{Name: "batch", Hosts: 1, Phases: map[string]int{store.PhaseStuck: 1}, States: map[string]int{HostStuck: 1}, SlotsUsed: 1},
		{Name: "empty", Phases: map[string]int{}, States: map[string]int{}, SlotsLimit: &one},
		{Name: "web", Hosts: 3, Phases: map[string]int{store.PhaseRejoining: 1, store.PhaseDraining: 1, store.PhasePending: 1},
			States: map[string]int{HostOut: 2, HostQueued: 1}, SlotsUsed: 2, SlotsLimit: &two},
	}
	if !reflect.DeepEqual(p.Groups, wantGroups) {
		t.Errorf("groups:\n got %+v\nwant %+v", p.Groups, wantGroups)
	}
	var got []string
	for _, c := range p.Timeline {
		got = append(got, c.Host+"/"+c.Outcome+"/"+map[bool]string{true: "open", false: "done"}[c.Open])
	}
	want := []string{"a/released/done", "a/rebooted/done", "b//open", "c//open", "e//open"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("timeline cycles = %v, want %v", got, want)
	}
	if empty := Build(Input{View: status.View{Hosts: []status.Host{}}}); empty.Groups == nil || empty.Timeline == nil {
		t.Errorf("an empty page has nil lists (null in JSON, which the page cannot iterate): %+v", empty)
	}
	if r := p.Rows["f"]; r != (Row{State: HostIdle, Group: NoGroup}) {
		t.Errorf("row of f, idle in a removed group: %+v", r)
	}
	if p.Now != at(10).UnixMilli() || p.Leader != LeaderThis || p.Process != "host-1" {
		t.Errorf("page header = %d %q %q", p.Now, p.Leader, p.Process)
	}
}

// The headline says why nothing moves, and counts the hosts of each state.
func TestRolloutHeadline(t *testing.T) {
	leads := &status.Policy{Leader: "c1 (pid 7)"}
	held := status.Host{Host: "h", Group: "web", Phase: store.PhasePending, Held: true, Waiting: "group web: outside its windows"}
	queued := status.Host{Host: "q", Group: "web", Phase: store.PhasePending}
	out := status.Host{Host: "o", Group: "web", Phase: store.PhaseDraining}
	stuck := status.Host{Host: "s", Group: "web", Phase: store.PhaseStuck}
	needs := status.Host{Host: "n", Phase: store.PhaseIdle, RebootRequired: true}
	idle := status.Host{Host: "i", Phase: store.PhaseIdle}
	tests := []struct {
		name      string
		view      status.View
		state     string
		headline  string
		wantCount map[string]int
	}{
		{"every host held", status.View{Policy: leads, Hosts: []status.Host{held, idle}}, RolloutHeld,
			"Held: every host that needs a reboot waits on a hold (1 host); see why on each", map[string]int{HostHeld: 1, HostIdle: 1}},
		{"moving", status.View{Policy: leads, Hosts: []status.Host{held, queued, out}}, RolloutRunning,
			"Rolling: 1 out of service, 1 queued, 1 held", map[string]int{HostHeld: 1, HostQueued: 1, HostOut: 1}},
		{"paused", status.View{Policy: leads, Paused: true, PauseReason: "lunch", Hosts: []status.Host{queued, needs}}, RolloutPaused,
			"Paused (lunch): no new reboot starts (2 hosts waiting); rollboot resume lifts it", map[string]int{HostQueued: 1, HostNeeds: 1}},
		{"paused for a while", status.View{Policy: leads, Paused: true, PauseReason: "lunch", PausedUntil: t0.Add(time.Hour), Hosts: []status.Host{queued}}, RolloutPaused,
			"Paused (lunch): no new reboot starts (1 host waiting); it ends by itself at " + t0.Add(time.Hour).UTC().Format(time.RFC3339) + ", or rollboot resume lifts it",
			map[string]int{HostQueued: 1}},
		{"a pause that ended", status.View{Policy: leads, Paused: true, PausedUntil: t0, Hosts: []status.Host{queued}}, RolloutRunning,
			"Rolling: 1 queued", map[string]int{HostQueued: 1}},
		{"frozen", status.View{Policy: &status.Policy{Leader: "c1", Problem: "bad"}, Hosts: []status.Host{queued}}, RolloutFrozen,
			"Frozen: the stored policy cannot be used, no new reboot starts (1 host waiting)", map[string]int{HostQueued: 1}},
		{"halted", status.View{Policy: leads, Halts: []status.Halt{{Scope: "web", Text: `group "web" halted at T: 2 failed cycles (a stuck, b unhealthy); rollboot resume -group web lifts it`}},
			Hosts: []status.Host{held, out}}, RolloutHalted,
			`Halted: group "web" halted at T: 2 failed cycles (a stuck, b unhealthy); rollboot resume -group web lifts it (1 host waiting)`,
			map[string]int{HostHeld: 1, HostOut: 1}},
		{"halt state unknown", status.View{Policy: leads, HaltProblem: "cannot read", Hosts: []status.Host{queued}}, RolloutHalted,
			"Halted: cannot read (1 host waiting)", map[string]int{HostQueued: 1}},
		{"no coordinator has led", status.View{Policy: &status.Policy{}, Hosts: []status.Host{needs}}, RolloutNoLeader,
			"No coordinator leads: nothing moves (1 host waiting)", map[string]int{HostNeeds: 1}},
		{"the leader is gone", status.View{Policy: &status.Policy{Leader: "c1", LeaderGone: true}, Hosts: []status.Host{needs, queued}},
			RolloutNoLeader, "No coordinator leads: c1 no longer holds the election lock; nothing moves (2 hosts waiting)",
			map[string]int{HostNeeds: 1, HostQueued: 1}},
		{"only stuck", status.View{Policy: leads, Hosts: []status.Host{stuck, held}}, RolloutStuck,
			"Stuck: 1 host, holding their slots (rollboot release HOST frees one)", map[string]int{HostStuck: 1, HostHeld: 1}},
		{"idle", status.View{Policy: leads, Hosts: []status.Host{idle}}, RolloutIdle, "Idle: no host needs a reboot", map[string]int{HostIdle: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(Input{Now: t0, View: tt.view})
			if p.Rollout != tt.state || p.Headline != tt.headline {
				t.Errorf("rollout %q %q\nwant %q %q", p.Rollout, p.Headline, tt.state, tt.headline)
			}
			if !reflect.DeepEqual(p.Counts, tt.wantCount) {
				t.Errorf("counts %v, want %v", p.Counts, tt.wantCount)
			}
		})
	}
}

// Held hosts are counted by the kind of their hold; a hold of unknown kind
// (a plan of an older rollboot) counts as "other".
func TestHeldBy(t *testing.T) {
	view := status.View{Policy: &status.Policy{Leader: "c1"}, Hosts: []status.Host{
		{Host: "a", Phase: store.PhasePending, Held: true, HoldKind: "alerts"},
		{Host: "b", Phase: store.PhasePending, Held: true, HoldKind: "alerts"},
		{Host: "c", Phase: store.PhasePending, Held: true},
		{Host: "d", Phase: store.PhasePending},
	}}
	p := Build(Input{Now: t0, View: view})
	if want := map[string]int{"alerts": 2, HoldOther: 1}; !reflect.DeepEqual(p.HeldBy, want) {
		t.Errorf("held by %v, want %v", p.HeldBy, want)
	}
	if p.Rows["a"].Hold != "alerts" || p.Rows["d"].Hold != "" {
		t.Errorf("rows %+v", p.Rows)
	}
}

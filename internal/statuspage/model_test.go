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
	}}
	done := map[string]time.Time{}
	for k, v := range cycle {
		done[k] = v
	}
	done[store.PhaseIdle] = at(4)
	hist := []store.HistoryRecord{
		{Host: "a", Group: "web", Outcome: "rebooted", Timeline: done, Finished: at(4)},
		{Host: "a", Group: "web", Outcome: "released", Timeline: map[string]time.Time{store.PhasePending: at(-9)}, Finished: at(-8)},
	}
	p := Build(Input{Now: at(10), Process: "host-1", Leader: LeaderThis, View: view, History: hist, SlotsLimit: map[string]int{"web": 2, "empty": 1}})

	two, one := 2, 1
	wantGroups := []Group{
		{Name: NoGroup, Hosts: 1, Phases: map[string]int{store.PhaseIdle: 1}},
		{Name: "batch", Hosts: 1, Phases: map[string]int{store.PhaseStuck: 1}, SlotsUsed: 1},
		{Name: "empty", Phases: map[string]int{}, SlotsLimit: &one},
		{Name: "web", Hosts: 3, Phases: map[string]int{store.PhaseRejoining: 1, store.PhaseDraining: 1, store.PhasePending: 1},
			SlotsUsed: 2, SlotsLimit: &two},
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
	if p.Now != at(10).UnixMilli() || p.Leader != LeaderThis || p.Process != "host-1" {
		t.Errorf("page header = %d %q %q", p.Now, p.Leader, p.Process)
	}
}

package bench

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// cycleAt is one host's cycle for cycleParts: its drain starts at start and
// each step follows the previous one after the given durations; the events it
// returns are those the emulator records, plus a readiness before the drain
// (the node ready before the rollout), which must not count.
func cycleAt(host string, start time.Time, drain, toReboot, boot, back time.Duration) (store.HistoryRecord, []nomadsim.Event) {
	drained := start.Add(drain)
	down := drained.Add(toReboot)
	booted := down.Add(boot / 2)
	ready := down.Add(boot)
	h := store.HistoryRecord{Host: host, Outcome: "rebooted", Finished: ready.Add(back),
		Timeline: map[string]time.Time{store.PhaseDraining: start}}
	evs := []nomadsim.Event{
		{Type: nomadsim.EventNodeReady, Host: host, Time: start.Add(-time.Second)},
		{Type: nomadsim.EventDrainStart, Host: host, Time: start},
		{Type: nomadsim.EventDrainComplete, Host: host, Time: drained},
		{Type: nomadsim.EventHostRebootStart, Host: host, Time: down},
		{Type: nomadsim.EventNodeDown, Host: host, Time: down.Add(boot / 4)},
		{Type: nomadsim.EventHostBoot, Host: host, Time: booted},
		{Type: nomadsim.EventNodeReady, Host: host, Time: ready},
	}
	return h, evs
}

// The parts are cut at the emulator's events, rollboot's are the two it
// spends, and with them at their group's mean only the machines' variance is
// left: here none, so the floor is exactly 1 although the cycles vary.
func TestCycleParts(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var hist []store.HistoryRecord
	var events []nomadsim.Event
	groupOf := map[string]string{}
	// Two groups of four hosts through two slots each; the machines' parts are
	// the same in every cycle, rollboot's 100ms or 300ms.
	for g, group := range []string{"a", "b"} {
		for i, own := range []time.Duration{100 * ms, 300 * ms, 300 * ms, 100 * ms} {
			host := group + string(rune('0'+i))
			groupOf[host] = group
			h, evs := cycleAt(host, t0.Add(time.Duration(g*10+i)*2*time.Second), 40*ms, own/4, 1200*ms, own*3/4)
			hist = append(hist, h)
			events = append(events, evs...)
		}
	}
	// Cycles of 1.34 s and 1.54 s: the bound is 2 waves of their mean.
	bound := 2 * 1440 * ms
	p := cycleParts(hist, events, groupOf, t0, 2, bound)
	if p.N != 8 {
		t.Fatalf("%d cycles split, want 8", p.N)
	}
	want := map[string]Spread{
		"drain": {40 * ms, 0}, "boot": {1200 * ms, 0}, "to reboot": {50 * ms, 25 * ms},
		"back": {150 * ms, 75 * ms}, "rollboot": {200 * ms, 100 * ms}, "cycle": {1440 * ms, 100 * ms},
	}
	got := map[string]Spread{"drain": p.Drain, "boot": p.Boot, "to reboot": p.ToReboot, "back": p.Back, "rollboot": p.Rollboot, "cycle": p.Cycle}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	if f := p.Floor; f.Replays != floorReplays || f.Mean != 1 || f.P90 != 1 {
		t.Errorf("floor with rollboot's parts at their mean: %+v, want exactly 1", f)
	}
	if f := makespanFloor(map[string][]time.Duration{"a": {1340 * ms, 1540 * ms, 1540 * ms, 1340 * ms}}, 2, bound, floorReplays); f.P90 <= 1 {
		t.Errorf("the same cycles as measured: floor %+v, want above 1 in some orders (else the test shows nothing)", f)
	}

	// A cycle whose node never showed ready is left out, and the floor, which
	// would replay fewer cycles than the bound counts, is not computed.
	var cut []nomadsim.Event
	for _, e := range events {
		if e.Host == "b3" && e.Type == nomadsim.EventNodeReady && e.Time.After(t0) {
			continue
		}
		cut = append(cut, e)
	}
	p = cycleParts(hist, cut, groupOf, t0, 2, bound)
	if p.N != 7 || p.Floor.Replays != 0 {
		t.Errorf("without b3's readiness: %d cycles split, floor %+v; want 7 and none", p.N, p.Floor)
	}
}

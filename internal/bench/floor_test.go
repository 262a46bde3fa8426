package bench

import (
	"testing"
	"time"
)

func TestListSchedule(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		cycles []time.Duration
		slots  int
		want   time.Duration
	}{
		{"equal cycles fill the slots evenly", []time.Duration{s, s, s, s}, 2, 2 * s},
		{"the next cycle takes the slot that freed first", []time.Duration{3 * s, s, s, s}, 2, 3 * s},
		{"a long last cycle is the tail", []time.Duration{s, s, s, 3 * s}, 2, 4 * s},
		{"fewer cycles than slots", []time.Duration{2 * s}, 5, 2 * s},
		{"none", nil, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listSchedule(tt.cycles, tt.slots); got != tt.want {
				t.Errorf("listSchedule = %s, want %s", got, tt.want)
			}
		})
	}
}

// Equal cycles leave nothing above the bound; varied ones do, by how much
// depends on the order, and the groups' worst is the rollout's.
func TestMakespanFloor(t *testing.T) {
	s := time.Second
	// The bounds: a, 2 waves of 1s; b, 1 wave of 1s.
	even := makespanFloor(map[string][]time.Duration{"a": {s, s, s, s}, "b": {s, s}}, 2, 2*s, 50)
	if even.Mean != 1 || even.P10 != 1 || even.P90 != 1 || even.Replays != 50 {
		t.Errorf("equal cycles: %+v, want a floor of exactly 1", even)
	}
	// Group a, 1,1,1,3 through 2 slots (bound 2 x 1.5 = 3): an order ends at 3
	// when the long cycle comes first or second, at 4 when it comes third or
	// last, so the ratio is 1 or 4/3, each in half the orders.
	varied := makespanFloor(map[string][]time.Duration{"a": {s, s, s, 3 * s}}, 2, 3*s, 300)
	if varied.P10 != 1 || varied.P90 != 4.0/3 || varied.Mean <= 1 || varied.Mean >= 4.0/3 {
		t.Errorf("varied cycles: %+v, want between 1 and 4/3, both reached", varied)
	}
	if again := makespanFloor(map[string][]time.Duration{"a": {s, s, s, 3 * s}}, 2, 3*s, 300); again != varied {
		t.Errorf("a second replay gave %+v, want the same (seeded) %+v", again, varied)
	}
	if got := makespanFloor(nil, 2, s, 300); got != (Floor{}) {
		t.Errorf("no cycles: %+v", got)
	}
}

// The floor is shown only from ten cycles per slot: with fewer, the first
// wave's longer cycles, mixed into later waves, put it above the ratio.
func TestFloorRowFromTenWaves(t *testing.T) {
	for _, tt := range []struct {
		hosts int
		shown bool
	}{{100, false}, {499, false}, {500, true}, {1000, true}} {
		r := &Rollout{Hosts: tt.hosts, Groups: 10, Concurrency: 5, Makespan: 105 * time.Second, LowerBound: 100 * time.Second,
			Floor: Floor{Mean: 1.02, P10: 1.01, P90: 1.03, Replays: floorReplays}}
		shown := false
		for _, row := range (&Report{Rollouts: []*Rollout{r}}).Rows() {
			if row.Figure == "  with nothing between the cycles" {
				shown = true
			}
		}
		if shown != tt.shown {
			t.Errorf("%d hosts in 10 groups of 5: floor row shown %v, want %v", tt.hosts, shown, tt.shown)
		}
	}
}

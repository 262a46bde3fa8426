package bench

import (
	"testing"
	"time"
)

// The group's end is its start, its cycles ÷ concurrency, its hand-offs and
// its tail, each per slot.
func TestSlotExcess(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	tests := []struct {
		name        string
		cycles      []span
		concurrency int
		want        Excess
	}{
		{"two slots, a gap on one, uneven ends", []span{{at(11.5), at(21.5)}, {at(1), at(11)}, {at(2), at(12)}, {at(12), at(22)}}, 2,
			Excess{Start: sec(1.5), HandOffs: sec(0.25), Tail: sec(0.25)}},
		{"the next drain takes the slot that freed first", []span{{at(0), at(10)}, {at(0), at(5)}, {at(6), at(9)}}, 2,
			Excess{Start: 0, HandOffs: sec(0.5), Tail: sec(0.5)}},
		{"fewer cycles than slots", []span{{at(1), at(3)}}, 5, Excess{Start: sec(1)}},
		{"none", nil, 5, Excess{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slotExcess(tt.cycles, tt.concurrency, t0); got != tt.want {
				t.Errorf("slotExcess = %+v, want %+v", got, tt.want)
			}
		})
	}
}

package bench

import (
	"slices"
	"time"
)

// Excess is where a group's makespan went beyond its cycles, per slot on
// average: the group ends at its start plus its cycles (hosts x mean cycle ÷
// concurrency, the lower bound when that divides evenly) plus these three.
type Excess struct {
	Group string
	// Start: from the sentinels to each slot's first drain.
	Start time.Duration
	// HandOffs: between a slot's cycles, from one's end to the next's drain.
	HandOffs time.Duration
	// Tail: from the mean slot's last end to the group's last: the slots do
	// not end together, since cycles vary.
	Tail time.Duration
}

// span is one cycle: its drain's start and its end.
type span struct{ start, end time.Time }

// slotExcess replays a group's cycles through its slots, first come first
// served as the coordinator hands them out (a drain takes the slot that freed
// first), and averages over the slots what was not a cycle.
func slotExcess(cycles []span, concurrency int, start time.Time) Excess {
	if len(cycles) == 0 || concurrency <= 0 {
		return Excess{}
	}
	cs := slices.Clone(cycles)
	slices.SortFunc(cs, func(a, b span) int { return a.start.Compare(b.start) })
	n := min(concurrency, len(cs))
	free := make([]time.Time, n) // each slot's last end
	var first, gaps time.Duration
	for i, c := range cs {
		if i < n {
			first += c.start.Sub(start)
			free[i] = c.end
			continue
		}
		k := firstFree(free, time.Time.Before)
		gaps += max(0, c.start.Sub(free[k]))
		free[k] = c.end
	}
	var sumEnds time.Duration
	last := free[0]
	for _, e := range free {
		sumEnds += e.Sub(start)
		if e.After(last) {
			last = e
		}
	}
	meanEnd := sumEnds / time.Duration(n)
	return Excess{Start: first / time.Duration(n), HandOffs: gaps / time.Duration(n), Tail: last.Sub(start) - meanEnd}
}

// firstFree is the index of the slot that frees first of free (each slot's
// end), the one a first-come-first-served hand-out gives the next cycle; the
// lowest index among equals.
func firstFree[T any](free []T, before func(a, b T) bool) int {
	k := 0
	for j := range free {
		if before(free[j], free[k]) {
			k = j
		}
	}
	return k
}

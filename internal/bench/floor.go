package bench

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

// Floor is the makespan ratio a rollout's own cycles allow with nothing
// between them: what is left of the ratio above it is rollboot's (the start
// and the hand-offs), the rest is the cycles' variance (the tail).
type Floor struct {
	Mean, P10, P90 float64
	Replays        int
}

// floorReplays is how many orders of the cycles makespanFloor replays.
const floorReplays = 300

// makespanFloor replays each group's measured cycles through its slots, first
// come first served as the coordinator hands them out, with no time between a
// cycle's end and the next one's start, in replays random orders (seeded, so
// that a run's figure is repeatable); each replay's ratio is the last group's
// end over bound, the rollout's lower bound (measureCycles).
func makespanFloor(byGroup map[string][]time.Duration, concurrency int, bound time.Duration, replays int) Floor {
	if concurrency <= 0 || replays <= 0 || bound <= 0 || len(byGroup) == 0 {
		return Floor{}
	}
	groups := slices.Sorted(maps.Keys(byGroup))
	rng := rand.New(rand.NewPCG(1, 2))
	ratios := make([]float64, replays)
	for i := range ratios {
		var end time.Duration
		for _, g := range groups {
			cs := slices.Clone(byGroup[g])
			rng.Shuffle(len(cs), func(a, b int) { cs[a], cs[b] = cs[b], cs[a] })
			end = max(end, listSchedule(cs, concurrency))
		}
		ratios[i] = float64(end) / float64(bound)
	}
	slices.Sort(ratios)
	var sum float64
	for _, r := range ratios {
		sum += r
	}
	return Floor{Mean: sum / float64(replays), P10: ratios[replays/10], P90: ratios[replays*9/10], Replays: replays}
}

// listSchedule is when the last of cycles ends, each started, in order, on the
// slot that frees first.
func listSchedule(cycles []time.Duration, slots int) time.Duration {
	free := make([]time.Duration, min(slots, max(1, len(cycles))))
	for _, c := range cycles {
		free[firstFree(free, func(a, b time.Duration) bool { return a < b })] += c
	}
	return slices.Max(free)
}

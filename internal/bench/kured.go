package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// kuredMakespan is the makespan of the same work done the Kured way: one lock
// for the whole cluster, and each node checking every period whether it needs a
// reboot and whether the lock is free (kured's rebootAsRequired loop, started
// after a random delay of up to one period, so the nodes' checks are spread over
// the period). Every node needs a reboot from the start; a node that takes the
// lock drains, reboots and releases the lock as soon as it is back, and the next
// node to check takes it. cycles are the measured cycle times (draining to idle),
// used in turn. The checks' phases are drawn from a fixed seed, so that the
// figure is the same for the same cycles.
func kuredMakespan(cycles []time.Duration, period time.Duration) time.Duration {
	n := len(cycles)
	if n == 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(13, 17))
	p := period.Seconds()
	phase := make([]float64, n)
	for i := range phase {
		phase[i] = rng.Float64() * p
	}
	waiting := make([]bool, n)
	for i := range waiting {
		waiting[i] = true
	}
	t := 0.0
	for k := 0; k < n; k++ {
		// The first waiting node to check at or after t takes the lock.
		best, at := -1, math.Inf(1)
		for i, w := range waiting {
			if !w {
				continue
			}
			next := phase[i]
			if next < t {
				next += math.Ceil((t-next)/p) * p
			}
			if next < at {
				best, at = i, next
			}
		}
		waiting[best] = false
		t = at + cycles[k].Seconds()
	}
	return time.Duration(t * float64(time.Second))
}

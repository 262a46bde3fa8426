package coordinator

import (
	"testing"
	"time"
)

func TestAfterPass(t *testing.T) {
	for _, tc := range []struct {
		name            string
		changed         bool
		chained         int
		poked           bool
		again, spinning bool
	}{
		{"nothing changed: wait", false, 0, false, false, false},
		{"nothing changed after a chain: wait, no spin", false, maxChainedPasses, false, false, false},
		{"a change: decide again at once", true, 0, false, true, false},
		{"the last pass of a chain still chains", true, maxChainedPasses - 1, false, true, false},
		{"a long chain of own writes only: a spin", true, maxChainedPasses, false, false, true},
		{"a long chain while others write: progress", true, maxChainedPasses, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			again, spinning := afterPass(tc.changed, tc.chained, tc.poked)
			if again != tc.again || spinning != tc.spinning {
				t.Errorf("afterPass(%v, %d, %v) = again %v, spinning %v; want %v, %v",
					tc.changed, tc.chained, tc.poked, again, spinning, tc.again, tc.spinning)
			}
		})
	}
}

// After a failed pass the next waits for its backoff (1 s after one failure):
// a change a watch saw meanwhile does not run it sooner (it would fail the
// same way, costing Nomad its requests again), and is kept for that pass.
// Without a failure, a kick runs the next pass at once.
func TestFailedPassWaitsForItsBackoff(t *testing.T) {
	c := New(Options{Runtime: Runtime{Resync: time.Hour}})
	kick := make(chan struct{}, 1)
	kick <- struct{}{}
	start := time.Now()
	if !c.waitForPass(t.Context(), kick, nil, 1) {
		t.Fatal("waitForPass ended")
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("a kick ran the pass after a failed one %s later, before its 1 s backoff", took)
	}
	if len(kick) != 1 {
		t.Errorf("the kick was taken: the change it stands for must wait for the next pass")
	}
	start = time.Now()
	c.waitForPass(t.Context(), kick, nil, 0)
	if took := time.Since(start); took > 5*time.Second || len(kick) != 0 {
		t.Errorf("a kick after a good pass: waited %s, kick left %d", took, len(kick))
	}
}

package coordinator

import (
	"testing"
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

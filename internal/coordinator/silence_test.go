package coordinator

import "testing"

// The silence keeper is handed the plans again only when they or the policy
// changed, and everything again after a new term (forget).
func TestSilenceDue(t *testing.T) {
	var h sideOutputs
	for i, tc := range []struct {
		gen     uint64
		version int
		forget  bool
		due     bool
	}{
		{gen: 1, version: 1, due: true},
		{gen: 1, version: 1},
		{gen: 2, version: 1, due: true},
		{gen: 2, version: 2, due: true},
		{gen: 2, version: 2},
		{gen: 2, version: 2, forget: true, due: true},
	} {
		if tc.forget {
			h.forget()
		}
		if got := h.silenceDue(tc.gen, tc.version); got != tc.due {
			t.Errorf("step %d: due %v, want %v", i, got, tc.due)
		}
	}
}

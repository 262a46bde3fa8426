package admission

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
)

// A host its wave holds (package wave: its canaries, a group followed) takes
// no slot: the slot goes to the next host in line, and the soak's end is when
// admission looks again.
func TestAdmitWaveHolds(t *testing.T) {
	in := input(1, pending("a", 0), pending("b", time.Minute))
	soakEnd := now.Add(30 * time.Minute)
	in.WaveHolds = map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitCanarySoak, soakEnd.Format(time.RFC3339))}
	in.WaveRecheck = soakEnd
	res, needs := Admit(in)
	if !needs.None() {
		t.Fatalf("needs %+v", needs)
	}
	if !res.Admitted["b"] || res.Admitted["a"] {
		t.Fatalf("admitted %v, want b alone", res.Admitted)
	}
	if k := res.Wait["a"].Kind; k != phase.WaitCanarySoak {
		t.Errorf("a waits for %s, want canary_soak", k.Name())
	}
	if !res.RecheckAt.Equal(soakEnd) {
		t.Errorf("recheck %v, want the soak's end %v", res.RecheckAt, soakEnd)
	}
}

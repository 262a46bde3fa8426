package phase

import (
	"testing"

	"github.com/rollboot/rollboot/internal/store"
)

// What may be carried out side by side: a decision that takes a node out of
// service, hands leadership over or clears a shared variable never is.
func TestCarriedOutTogether(t *testing.T) {
	plan := func(ph string) store.Plan { return store.Plan{Host: "a", Phase: ph} }
	for _, tc := range []struct {
		name                          string
		d                             Decision
		planOnly, givesBack, together bool
		apart                         bool
	}{
		{"a plan write", Decision{Write: true}, true, true, true, true},
		{"a grant", Decision{Write: true, StartDrain: true}, false, false, false, true},
		{"a cordon", Decision{Write: true, Cordon: true}, false, false, false, true},
		{"a close", Decision{Write: true, SetEligible: true, History: &store.HistoryRecord{}}, false, true, true, true},
		{"a hand-over", Decision{Write: true, HandOver: []string{"nomad"}}, false, false, false, false},
		{"a request cleared", Decision{Write: true, ClearRequest: true}, false, false, false, false},
		{"a cancel cleared", Decision{ClearCancel: true}, false, false, false, false},
		{"an alert", Decision{Write: true, Unhealthy: "web"}, false, true, true, true},
	} {
		d := tc.d
		if d.PlanOnly() != tc.planOnly || d.GivesBackOnly() != tc.givesBack || d.StoredTogether() != tc.together || d.StoredApart() != tc.apart {
			t.Errorf("%s: PlanOnly %v GivesBackOnly %v StoredTogether %v StoredApart %v, want %v %v %v %v", tc.name,
				d.PlanOnly(), d.GivesBackOnly(), d.StoredTogether(), d.StoredApart(), tc.planOnly, tc.givesBack, tc.together, tc.apart)
		}
	}
	in := Input{Plan: plan(store.PhaseRejoining)}
	if d := (Decision{Write: true, Plan: plan(store.PhaseIdle)}); !d.FreesSlot(in) || d.BecomesPending(in) {
		t.Error("a close must free the slot and not make the host pending")
	}
	if d := (Decision{Plan: plan(store.PhaseIdle)}); d.FreesSlot(in) {
		t.Error("a decision not written frees nothing")
	}
	in = Input{Plan: plan(store.PhaseIdle)}
	if d := (Decision{Write: true, Plan: plan(store.PhasePending)}); !d.BecomesPending(in) || d.FreesSlot(in) {
		t.Error("a need seen must make the host pending")
	}
	if !(Decision{ClearCancel: true}).Acts() || (Decision{}).Acts() {
		t.Error("Acts: a cleared cancel acts, an empty decision does not")
	}
}

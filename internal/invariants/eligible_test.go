package invariants

import (
	"testing"

	ns "github.com/rollboot/rollboot/internal/nomadsim"
)

// A node made eligible after its drain completed may get work again: rebooting it
// while it is eligible breaks invariant 4 (the race of an operator marking a
// drained node eligible right before the reboot).
func TestRebootWhileEligibleAgain(t *testing.T) {
	tests := []struct {
		name   string
		events []ns.Event
		want   int // violations of invariant 4
	}{
		{"drained then rebooted", seq(cycle("a", "na")), 0},
		{"made eligible between the drain and the reboot", seq([]ns.Event{
			{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
			{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
			{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
			{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
			{Type: ns.EventHostBoot, Host: "a", NodeID: "na"},
		}), 1},
		{"made eligible and ineligible again before the reboot", seq([]ns.Event{
			{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
			{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
			{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
			{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "ineligible"}},
			{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
			{Type: ns.EventHostBoot, Host: "a", NodeID: "na"},
			{Type: ns.EventNodeReady, Host: "a", NodeID: "na"},
			{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
		}), 0},
		{"a failed attempt given back, then drained again", seq([]ns.Event{
			{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
			{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
			{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
		}, cycle("a", "na")), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.events, map[string]Final{"a": {HasNode: true, Eligible: true, Ready: true}}, Spec{})
			got := 0
			for _, v := range res.Violations {
				if v.Invariant == 4 {
					got++
				} else {
					t.Errorf("unexpected %s", v)
				}
			}
			if got != tc.want {
				t.Errorf("invariant 4 violations = %d, want %d (%v)", got, tc.want, res.Violations)
			}
		})
	}
}

// A failed attempt given back (eligible again, no reboot) is back in service: the
// next host of its group may go (invariant 1).
func TestGivenBackIsInService(t *testing.T) {
	giveBack := []ns.Event{
		{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
		{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
		{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
	}
	final := map[string]Final{"a": {HasNode: true, Eligible: true, Ready: true}, "b": {HasNode: true, Eligible: true, Ready: true}}
	res := Check(seq(giveBack, cycle("b", "nb"), cycle("a", "na")), final,
		Spec{Group: map[string]string{"a": "g", "b": "g"}, Concurrency: map[string]int{"g": 1}, Reboots: map[string]int{"a": 1, "b": 1}})
	if len(res.Violations) != 0 || res.Peak["g"] != 1 {
		t.Errorf("violations %v, peak %v", res.Violations, res.Peak)
	}
}

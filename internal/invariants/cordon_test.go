package invariants

import (
	"strings"
	"testing"

	ns "github.com/rollboot/rollboot/internal/nomadsim"
)

// A cordon (a node made ineligible with no drain, while its host is next in
// line) is rollboot's way of keeping work off a node it drains next: it is not
// out of service and counts against no group, it may become part of the
// drain or be given back, but it must never be left at the end, whether or
// not the test knows the node's eligibility before.
func TestCordon(t *testing.T) {
	ineligible := func(h, n string) ns.Event {
		return ns.Event{Type: ns.EventEligibility, Host: h, NodeID: n, Details: map[string]string{"eligibility": "ineligible"}}
	}
	eligible := func(h, n string) ns.Event {
		return ns.Event{Type: ns.EventEligibility, Host: h, NodeID: n, Details: map[string]string{"eligibility": "eligible"}}
	}
	operatorDrain := ns.Event{Type: ns.EventDrainStart, Host: "b", NodeID: "nb", Details: map[string]string{"meta.message": "maintenance"}}
	tests := []struct {
		name   string
		events []ns.Event
		final  Final
		known  bool   // the test knows b was eligible before
		want   string // a part of the one violation wanted ("": none)
	}{
		{name: "cordoned while a drains, then drained and rebooted", events: seq(
			[]ns.Event{ineligible("b", "nb")}, cycle("a", "na"), cycle("b", "nb")),
			final: Final{HasNode: true, Eligible: true, Ready: true}, known: true},
		{name: "cordoned, then given back", events: seq([]ns.Event{ineligible("b", "nb")}, cycle("a", "na"), []ns.Event{eligible("b", "nb")}),
			final: Final{HasNode: true, Eligible: true, Ready: true}, known: true},
		{name: "cordoned and left", events: seq([]ns.Event{ineligible("b", "nb")}, cycle("a", "na")),
			final: Final{HasNode: true, Ready: true}, known: true, want: "neither drained nor given back"},
		{name: "cordoned and left, eligibility before not known", events: seq([]ns.Event{ineligible("b", "nb")}, cycle("a", "na")),
			final: Final{HasNode: true, Ready: true}, want: "neither drained nor given back"},
		{name: "cordoned, then drained by someone else: theirs", events: seq([]ns.Event{ineligible("b", "nb"), operatorDrain,
			{Type: ns.EventDrainComplete, Host: "b", NodeID: "nb", Details: map[string]string{"deadline_reached": "false"}}}),
			final: Final{HasNode: true, Ready: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Group: map[string]string{"a": "g", "b": "g"}, Concurrency: map[string]int{"g": 1}}
			if tc.known {
				spec.EligibleBefore = map[string]bool{"a": true, "b": true}
			}
			res := Check(tc.events, map[string]Final{"a": {HasNode: true, Eligible: true, Ready: true}, "b": tc.final}, spec)
			if tc.want == "" {
				if len(res.Violations) != 0 {
					t.Errorf("violations %v, want none", res.Violations)
				}
				return
			}
			if len(res.Violations) != 1 || res.Violations[0].Invariant != 3 || res.Violations[0].Host != "b" ||
				!strings.Contains(res.Violations[0].Msg, tc.want) {
				t.Errorf("violations %v, want one of invariant 3 on b saying %q", res.Violations, tc.want)
			}
		})
	}
}

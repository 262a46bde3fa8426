package invariants

import (
	"strings"
	"testing"

	ns "github.com/rollboot/rollboot/internal/nomadsim"
)

// rollbootDrain is the detail of the start of a drain of rollboot's.
var rollbootDrain = map[string]string{DrainGrantDetail: "g1"}

// cycle is the event sequence of one correct reboot of host h (node n).
func cycle(h, n string) []ns.Event {
	return []ns.Event{
		{Type: ns.EventDrainStart, Host: h, NodeID: n, Details: rollbootDrain},
		{Type: ns.EventDrainComplete, Host: h, NodeID: n, Details: map[string]string{"deadline_reached": "false"}},
		{Type: ns.EventHostRebootStart, Host: h, NodeID: n},
		{Type: ns.EventNodeDown, Host: h, NodeID: n},
		{Type: ns.EventHostBoot, Host: h, NodeID: n},
		{Type: ns.EventNodeReady, Host: h, NodeID: n},
		{Type: ns.EventEligibility, Host: h, NodeID: n, Details: map[string]string{"eligibility": "eligible"}},
	}
}

func seq(events ...[]ns.Event) []ns.Event {
	var out []ns.Event
	for _, es := range events {
		out = append(out, es...)
	}
	for i := range out {
		out[i].Seq = i + 1
	}
	return out
}

// interleave runs two cycles side by side: both hosts out of service at once.
func interleave(a, b []ns.Event) []ns.Event {
	var out []ns.Event
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

func TestCheck(t *testing.T) {
	final := map[string]Final{
		"a": {HasNode: true, Eligible: true, Ready: true},
		"b": {HasNode: true, Eligible: true, Ready: true},
	}
	groups := map[string]string{"a": "g", "b": "g"}
	tests := []struct {
		name   string
		events []ns.Event
		final  map[string]Final
		spec   Spec
		want   []int // invariants violated, in order
		peak   int
	}{
		{
			name:   "one host after the other is fine",
			events: seq(cycle("a", "na"), cycle("b", "nb")),
			spec:   Spec{Group: groups, Concurrency: map[string]int{"g": 1}, Reboots: map[string]int{"a": 1, "b": 1}},
			peak:   1,
		},
		{
			name:   "two at once in a group of concurrency 1",
			events: seq(interleave(cycle("a", "na"), cycle("b", "nb"))),
			spec:   Spec{Group: groups, Concurrency: map[string]int{"g": 1}},
			want:   []int{1},
			peak:   2,
		},
		{
			name:   "two at once is fine with concurrency 2",
			events: seq(interleave(cycle("a", "na"), cycle("b", "nb"))),
			spec:   Spec{Group: groups, Concurrency: map[string]int{"g": 2}},
			peak:   2,
		},
		{
			name: "a node still initializing after a disconnection is out of service",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
				{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
				{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
				{Type: ns.EventNodeDisconnected, Host: "a", NodeID: "na"},
				{Type: ns.EventHostBoot, Host: "a", NodeID: "na"},
				{Type: ns.EventNodeInit, Host: "a", NodeID: "na"},
				{Type: ns.EventEligibility, Host: "a", NodeID: "na", Details: map[string]string{"eligibility": "eligible"}},
				{Type: ns.EventDrainStart, Host: "b", NodeID: "nb", Details: rollbootDrain},
				{Type: ns.EventNodeReady, Host: "a", NodeID: "na"},
			}),
			spec: Spec{Group: groups, Concurrency: map[string]int{"g": 1}},
			want: []int{1},
			peak: 2,
		},
		{
			name: "an operator's drain does not count against the concurrency",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "b", NodeID: "nb", Details: map[string]string{"meta.message": "kernel debugging"}},
				{Type: ns.EventDrainComplete, Host: "b", NodeID: "nb", Details: map[string]string{"deadline_reached": "false"}},
			}, cycle("a", "na")),
			spec: Spec{Group: groups, Concurrency: map[string]int{"g": 1}},
			peak: 1,
		},
		{
			name: "an operator's drain over a cycle takes the node back from it",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
				{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "false"}},
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: map[string]string{"meta.message": "disk swap"}},
			}, cycle("b", "nb")),
			spec: Spec{Group: groups, Concurrency: map[string]int{"g": 1}},
			peak: 1,
		},
		{
			name: "a reboot without a drain",
			events: seq([]ns.Event{
				{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
				{Type: ns.EventHostBoot, Host: "a", NodeID: "na"},
			}),
			want: []int{4},
		},
		{
			name: "a reboot while the drain still runs",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
				{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
			}),
			want: []int{4},
		},
		{
			name: "a reboot after a canceled drain",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
				{Type: ns.EventDrainCancel, Host: "a", NodeID: "na", Details: map[string]string{"mark_eligible": "true"}},
				{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
			}),
			want: []int{4},
		},
		{
			name: "a forced drain is allowed only under force",
			events: seq([]ns.Event{
				{Type: ns.EventDrainStart, Host: "a", NodeID: "na", Details: rollbootDrain},
				{Type: ns.EventDrainComplete, Host: "a", NodeID: "na", Details: map[string]string{"deadline_reached": "true"}},
				{Type: ns.EventHostRebootStart, Host: "a", NodeID: "na"},
			}),
			want: []int{4},
		},
		{
			name:   "a node left ineligible",
			events: seq(cycle("a", "na")[:6]),
			final:  map[string]Final{"a": {HasNode: true, Eligible: false, Ready: true}},
			spec:   Spec{EligibleBefore: map[string]bool{"a": true}},
			want:   []int{3},
		},
		{
			name:   "a node ineligible before made eligible",
			events: seq(cycle("a", "na")),
			final:  map[string]Final{"a": {HasNode: true, Eligible: true, Ready: true}},
			spec:   Spec{EligibleBefore: map[string]bool{"a": false}},
			want:   []int{3, 3},
		},
		{
			name:   "a node left draining",
			events: seq(cycle("a", "na")[:1]),
			final:  map[string]Final{"a": {HasNode: true, Draining: true}},
			spec:   Spec{EligibleBefore: map[string]bool{"a": true}},
			want:   []int{3, 3},
		},
		{
			name: "a server of a healthy cluster that can lose one",
			events: seq([]ns.Event{{Type: ns.EventHostRebootStart, Host: "s1", Details: map[string]string{
				"nomad_server": "true", "nomad_healthy": "true", "nomad_failure_tolerance": "1",
				"vault_server": "true", "vault_healthy": "true", "vault_failure_tolerance": "2"}}}),
		},
		{
			name: "a server of a cluster that cannot lose one",
			events: seq([]ns.Event{{Type: ns.EventHostRebootStart, Host: "s1", Details: map[string]string{
				"nomad_server": "true", "nomad_healthy": "true", "nomad_failure_tolerance": "1",
				"consul_server": "true", "consul_healthy": "true", "consul_failure_tolerance": "0"}}}),
			want: []int{2},
		},
		{
			name: "a server of an unhealthy cluster",
			events: seq([]ns.Event{{Type: ns.EventHostRebootStart, Host: "s1", Details: map[string]string{
				"vault_server": "true", "vault_healthy": "false", "vault_failure_tolerance": "1"}}}),
			want: []int{2},
		},
		{
			name:   "two reboots for one request",
			events: seq(cycle("a", "na"), cycle("a", "na")),
			spec:   Spec{Reboots: map[string]int{"a": 1}},
			want:   []int{5},
		},
		{
			name:   "a request never served",
			events: nil,
			spec:   Spec{Reboots: map[string]int{"a": 1}},
			want:   []int{5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.final
			if f == nil {
				f = final
			}
			res := Check(tc.events, f, tc.spec)
			var got []int
			for _, v := range res.Violations {
				got = append(got, v.Invariant)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("violations %v, want invariants %v", res.Violations, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("violations %v, want invariants %v", res.Violations, tc.want)
				}
			}
			if tc.peak != 0 && res.Peak["g"] != tc.peak {
				t.Errorf("peak = %d, want %d", res.Peak["g"], tc.peak)
			}
			for _, v := range res.Violations {
				if !strings.Contains(v.String(), "invariant") {
					t.Errorf("violation text %q", v)
				}
			}
		})
	}
}

package policy

import (
	"testing"
	"time"
)

// A host waiting for a slot (a full group, a spent max_unavailable, or behind
// such a host) is marked ForSlot, so the coordinator can keep the volatile text
// (the host ahead, the counts) out of its plan; a held group is not.
func TestAdmitForSlot(t *testing.T) {
	t0 := time.Date(2025, 1, 6, 22, 0, 0, 0, time.UTC)
	req := func(host, group string, minutes int) Request {
		return Request{Host: host, Group: group, RequestedAt: t0.Add(time.Duration(minutes) * time.Minute)}
	}
	tests := []struct {
		name    string
		groups  []GroupStatus
		forSlot map[string]bool // every waiting host
	}{
		{
			name:    "full group: the first and those behind it",
			groups:  []GroupStatus{{Group: Group{Name: "web", Concurrency: 1}, Size: 5, Active: 1}},
			forSlot: map[string]bool{"a": true, "b": true, "c": true},
		},
		{
			name:    "max_unavailable reached",
			groups:  []GroupStatus{{Group: Group{Name: "web", Concurrency: 5, MaxUnavailablePct: 20}, Size: 5, Unavailable: 1}},
			forSlot: map[string]bool{"a": true, "b": true, "c": true},
		},
		{
			name:    "held group (window): not for a slot",
			groups:  []GroupStatus{{Group: Group{Name: "web", Concurrency: 1}, Size: 5, Hold: "outside the maintenance windows"}},
			forSlot: map[string]bool{"a": false, "b": false, "c": false},
		},
		{
			name:    "unknown group: not for a slot",
			groups:  []GroupStatus{{Group: Group{Name: "db", Concurrency: 1}, Size: 5}},
			forSlot: map[string]bool{"a": false, "b": false, "c": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Admit(tt.groups, []Request{req("a", "web", 1), req("b", "web", 2), req("c", "web", 3)})
			if len(got.Waiting) != len(tt.forSlot) {
				t.Fatalf("waiting %+v, want %d hosts", got.Waiting, len(tt.forSlot))
			}
			for _, w := range got.Waiting {
				if w.ForSlot != tt.forSlot[w.Host] {
					t.Errorf("%s: ForSlot %v, want %v (%s)", w.Host, w.ForSlot, tt.forSlot[w.Host], w.Reason)
				}
			}
		})
	}
}

package admission

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

func TestNextInLine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pending := func(host, group string, ago time.Duration, node bool) Pending {
		p := Pending{Request: policy.Request{Host: host, Group: group, RequestedAt: t0.Add(-ago)}}
		if node {
			p.Node = &phase.NodeView{ID: "n-" + host}
		}
		return p
	}
	queue := []Pending{
		pending("a3", "a", time.Minute, true),
		pending("a1", "a", time.Hour, true),
		pending("a2", "a", 30*time.Minute, true),
		pending("b1", "b", time.Hour, true),
		pending("c1", "c", time.Hour, true),
		pending("d1", "d", time.Hour, false),
		pending("d2", "d", time.Minute, true),
	}
	queued := map[string]phase.WaitReason{}
	for _, q := range queue {
		queued[q.Host] = phase.WaitReason{Kind: phase.WaitQueued}
	}
	for _, tc := range []struct {
		name  string
		slots map[string]int
		wait  func(map[string]phase.WaitReason)
		want  map[string][]string
	}{
		{"none freed", nil, nil, map[string][]string{}},
		{"the first of each group freed, in the order served", map[string]int{"a": 2, "b": 1}, nil,
			map[string][]string{"a": {"n-a1", "n-a2"}, "b": {"n-b1"}}},
		{"more freed than queued", map[string]int{"b": 3}, nil, map[string][]string{"b": {"n-b1"}}},
		{"a host held by more than its slot is passed over", map[string]int{"a": 1},
			func(w map[string]phase.WaitReason) { w["a1"] = phase.WaitReason{Kind: phase.WaitCapacity} }, map[string][]string{"a": {"n-a2"}}},
		{"a host without a node takes its place, with no node to read", map[string]int{"d": 1}, nil, map[string][]string{}},
		{"and the next one its own", map[string]int{"d": 2}, nil, map[string][]string{"d": {"n-d2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := map[string]phase.WaitReason{}
			for h, w := range queued {
				wait[h] = w
			}
			if tc.wait != nil {
				tc.wait(wait)
			}
			if got := NextInLine(queue, wait, tc.slots); !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("NextInLine = %q, want %q", got, tc.want)
			}
		})
	}
}

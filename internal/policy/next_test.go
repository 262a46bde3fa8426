package policy

import (
	"maps"
	"slices"
	"testing"
	"time"
)

func TestNextInLine(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	req := func(host, group string, after time.Duration) Request {
		return Request{Host: host, Group: group, RequestedAt: t0.Add(after)}
	}
	queue := []Request{
		req("c", "web", 2*time.Minute), req("a", "web", time.Minute), req("b", "web", time.Minute),
		req("x", "batch", 0), req("y", "batch", time.Hour),
	}
	tests := []struct {
		name  string
		queue []Request
		n     int
		want  []string
	}{
		{name: "off", queue: queue, n: 0},
		{name: "negative is off", queue: queue, n: -1},
		{name: "the first of each group, ties by name", queue: queue, n: 1, want: []string{"a", "x"}},
		{name: "two per group", queue: queue, n: 2, want: []string{"a", "b", "x", "y"}},
		{name: "more than queued", queue: queue, n: 10, want: []string{"a", "b", "c", "x", "y"}},
		{name: "a host queued twice counts once", queue: []Request{req("a", "web", 0), req("a", "web", time.Second), req("b", "web", time.Minute)},
			n: 2, want: []string{"a", "b"}},
		{name: "empty", n: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(NextInLine(tc.queue, tc.n)))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("next in line %v, want %v", got, tc.want)
			}
		})
	}
}

package statemetrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A drain's hand-off is observed from the later of its host's asking and the
// last slot of its group freed; a drain with no slot seen freed since is not.
func TestSlotHandOff(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		freed     bool
		requested time.Time
		started   time.Time
		want      string // the histogram's count and sum
	}{
		{"waiting host drains after the slot frees", true, t0.Add(-time.Hour), t0.Add(5 * time.Second), "count 1 sum 5"},
		{"host asked after the slot freed", true, t0.Add(time.Minute), t0.Add(70 * time.Second), "count 1 sum 10"},
		{"no slot seen freed", false, t0, t0.Add(time.Second), "count 0 sum 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := NewHandOffs(New(reg))
			if tt.freed {
				h.SlotFreed("web", t0)
			}
			h.DrainStarted("web", tt.requested, tt.started)
			h.DrainStarted("web", tt.requested, tt.started.Add(time.Hour)) // a second drain: no slot freed since
			if got := handOffs(t, reg); got != tt.want {
				t.Errorf("hand-offs: %s, want %s", got, tt.want)
			}
		})
	}
}

// handOffs is the count and sum of the slot hand-offs reg holds.
func handOffs(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "rollboot_slot_handoff_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return fmt.Sprintf("count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
		}
	}
	t.Fatal("no rollboot_slot_handoff_seconds")
	return ""
}

package policy

import (
	"testing"
	"time"
)

func TestSettleUntil(t *testing.T) {
	back := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		settle   time.Duration
		lastBack time.Time
		now      time.Time
		until    time.Time
		settling bool
	}{
		{name: "no settle time", settle: 0, lastBack: back, now: back},
		{name: "no host back yet", settle: 2 * time.Minute, now: back},
		{name: "just back", settle: 2 * time.Minute, lastBack: back, now: back, until: back.Add(2 * time.Minute), settling: true},
		{name: "a second before the end", settle: 2 * time.Minute, lastBack: back, now: back.Add(119 * time.Second), until: back.Add(2 * time.Minute), settling: true},
		{name: "at the end", settle: 2 * time.Minute, lastBack: back, now: back.Add(2 * time.Minute), until: back.Add(2 * time.Minute)},
		{name: "long after", settle: 2 * time.Minute, lastBack: back, now: back.Add(time.Hour), until: back.Add(2 * time.Minute)},
		{name: "clock behind the return", settle: time.Minute, lastBack: back, now: back.Add(-time.Minute), until: back.Add(time.Minute), settling: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			until, settling := SettleUntil(Group{Name: "g", Settle: tt.settle}, tt.lastBack, tt.now)
			if !until.Equal(tt.until) || settling != tt.settling {
				t.Errorf("SettleUntil = %v, %v; want %v, %v", until, settling, tt.until, tt.settling)
			}
		})
	}
}

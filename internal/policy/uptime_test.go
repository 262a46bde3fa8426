package policy

import (
	"fmt"
	"testing"
	"time"
)

// Each host's jitter is fixed by its name, within 10 % of max_uptime, and a
// fleet's hosts spread over that share rather than asking at once.
func TestUptimeJitter(t *testing.T) {
	const limit = 30 * 24 * time.Hour
	seen := map[time.Duration]bool{}
	var lo, hi time.Duration = limit, 0
	for i := range 200 {
		host := fmt.Sprintf("web-%03d", i)
		j := UptimeJitter(host, limit)
		if j < 0 || j >= limit/10 {
			t.Fatalf("%s: jitter %s outside [0, %s)", host, j, limit/10)
		}
		if again := UptimeJitter(host, limit); again != j {
			t.Fatalf("%s: jitter %s then %s: not deterministic", host, j, again)
		}
		seen[j] = true
		lo, hi = min(lo, j), max(hi, j)
	}
	if len(seen) < 195 || hi-lo < limit/10*8/10 {
		t.Errorf("200 hosts got %d distinct jitters spanning %s..%s: want them spread over most of %s", len(seen), lo, hi, limit/10)
	}
	if j := UptimeJitter("web-001", 5); j != 0 {
		t.Errorf("a max_uptime too short to spread: jitter %s, want 0", j)
	}
}

func TestUptimeDue(t *testing.T) {
	booted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		booted time.Time
		max    time.Duration
		ok     bool
	}{
		{"no max_uptime", booted, 0, false},
		{"boot time unknown", time.Time{}, time.Hour, false},
		{"due after max and jitter", booted, 30 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, ok := UptimeDue("web-1", tt.booted, tt.max)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && !due.Equal(booted.Add(tt.max+UptimeJitter("web-1", tt.max))) {
				t.Errorf("due %s", due)
			}
		})
	}
}

func TestUptimeReason(t *testing.T) {
	for _, tt := range []struct {
		d, ref time.Duration
		want   string
	}{
		{31 * 24 * time.Hour, 30 * 24 * time.Hour, "31d"},
		{31*24*time.Hour + 10*time.Hour, 30 * 24 * time.Hour, "31.4d"},
		{36 * time.Hour, 36 * time.Hour, "1.5d"},
		{90 * time.Minute, time.Hour, "1.5h"},
		{3*time.Second + 250*time.Millisecond, 3 * time.Second, "3.2s"},
		{10 * time.Minute, 10 * time.Minute, "10m"},
	} {
		if got := inUnit(tt.d, tt.ref); got != tt.want {
			t.Errorf("inUnit(%s, %s) = %q, want %q", tt.d, tt.ref, got, tt.want)
		}
	}
	r := UptimeReason("web-1", 30*24*time.Hour)
	want := fmt.Sprintf("uptime %s > 30d", inUnit(30*24*time.Hour+UptimeJitter("web-1", 30*24*time.Hour), 24*time.Hour))
	if r != want || r == "uptime 30d > 30d" {
		t.Errorf("UptimeReason = %q, want %q (the jitter shown)", r, want)
	}
}

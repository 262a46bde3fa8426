package policy

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests must not depend on the machine's zoneinfo
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load location %s: %v", name, err)
	}
	return loc
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return ts
}

func hm(h, m int) time.Duration { return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute }

var allDays = []time.Weekday{time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}

func TestWindow(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	newYork := mustLoc(t, "America/New_York")
	tokyo := mustLoc(t, "Asia/Tokyo")

	weekdays := []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	office := Window{Name: "office", Days: weekdays, Start: hm(9, 0), End: hm(17, 0)}
	// Monday 22:00 to Tuesday 04:00.
	mondayNight := Window{Name: "night", Days: []time.Weekday{time.Monday}, Start: hm(22, 0), End: hm(4, 0)}
	saturday := Window{Name: "sat", Days: []time.Weekday{time.Saturday}, Start: 0, End: 24 * time.Hour}

	// 2025-01-06 is a Monday.
	tests := []struct {
		name    string
		w       Window
		now     string
		open    bool
		remain  time.Duration
		nextOpn string // "" = now when open, "never" = zero time
	}{
		{name: "same day inside", w: office, now: "2025-01-06T10:00:00Z", open: true, remain: 7 * time.Hour},
		{name: "same day at start", w: office, now: "2025-01-06T09:00:00Z", open: true, remain: 8 * time.Hour},
		{name: "same day just before start", w: office, now: "2025-01-06T08:59:59Z", nextOpn: "2025-01-06T09:00:00Z"},
		{name: "same day end is exclusive", w: office, now: "2025-01-06T17:00:00Z", nextOpn: "2025-01-07T09:00:00Z"},
		{name: "same day weekend closed", w: office, now: "2025-01-11T10:00:00Z", nextOpn: "2025-01-13T09:00:00Z"},
		{name: "friday evening waits for monday", w: office, now: "2025-01-10T18:00:00Z", nextOpn: "2025-01-13T09:00:00Z"},

		{name: "midnight: monday evening", w: mondayNight, now: "2025-01-06T23:00:00Z", open: true, remain: 5 * time.Hour},
		{name: "midnight: open tuesday 03:00 because it started monday", w: mondayNight, now: "2025-01-07T03:00:00Z", open: true, remain: time.Hour},
		{name: "midnight: closed tuesday 04:00", w: mondayNight, now: "2025-01-07T04:00:00Z", nextOpn: "2025-01-13T22:00:00Z"},
		{name: "midnight: closed monday 21:59", w: mondayNight, now: "2025-01-06T21:59:00Z", nextOpn: "2025-01-06T22:00:00Z"},
		{name: "midnight: tuesday night not listed", w: mondayNight, now: "2025-01-07T23:00:00Z", nextOpn: "2025-01-13T22:00:00Z"},
		{name: "midnight: monday 02:00 belongs to sunday", w: mondayNight, now: "2025-01-06T02:00:00Z", nextOpn: "2025-01-06T22:00:00Z"},

		{name: "day boundary: saturday midnight open", w: saturday, now: "2025-01-11T00:00:00Z", open: true, remain: 24 * time.Hour},
		{name: "day boundary: friday last second closed", w: saturday, now: "2025-01-10T23:59:59Z", nextOpn: "2025-01-11T00:00:00Z"},
		{name: "day boundary: sunday midnight closed", w: saturday, now: "2025-01-12T00:00:00Z", nextOpn: "2025-01-18T00:00:00Z"},
		{name: "24h window (start == end)", w: Window{Days: []time.Weekday{time.Monday}, Start: hm(12, 0), End: hm(12, 0)},
			now: "2025-01-07T11:00:00Z", open: true, remain: time.Hour},

		// Berlin springs forward on Sunday 2025-03-30 at 02:00 CET -> 03:00 CEST.
		{name: "berlin spring: 01:00-05:00 lasts 3h", w: Window{Days: []time.Weekday{time.Sunday}, Start: hm(1, 0), End: hm(5, 0), Location: berlin},
			now: "2025-03-30T00:00:00Z" /* 01:00 CET */, open: true, remain: 3 * time.Hour},
		{name: "berlin spring: saturday 22:00-04:00 lasts 5h", w: Window{Days: []time.Weekday{time.Saturday}, Start: hm(22, 0), End: hm(4, 0), Location: berlin},
			now: "2025-03-29T21:00:00Z" /* 22:00 CET */, open: true, remain: 5 * time.Hour},
		{name: "berlin spring: window in the gap moves forward", w: Window{Days: []time.Weekday{time.Sunday}, Start: hm(2, 15), End: hm(2, 45), Location: berlin},
			now: "2025-03-30T00:30:00Z", nextOpn: "2025-03-30T01:15:00Z" /* 03:15 CEST */},
		// Berlin falls back on Sunday 2025-10-26 at 03:00 CEST -> 02:00 CET.
		{name: "berlin fall: saturday 22:00-04:00 lasts 7h", w: Window{Days: []time.Weekday{time.Saturday}, Start: hm(22, 0), End: hm(4, 0), Location: berlin},
			now: "2025-10-25T20:00:00Z" /* 22:00 CEST */, open: true, remain: 7 * time.Hour},
		{name: "berlin fall: ambiguous start means the later 02:30", w: Window{Days: []time.Weekday{time.Sunday}, Start: hm(2, 30), End: hm(3, 30), Location: berlin},
			now: "2025-10-26T00:45:00Z" /* 02:45 CEST, first pass */, nextOpn: "2025-10-26T01:30:00Z" /* 02:30 CET */},
		{name: "berlin fall: open in the later 02:30", w: Window{Days: []time.Weekday{time.Sunday}, Start: hm(2, 30), End: hm(3, 30), Location: berlin},
			now: "2025-10-26T01:30:00Z", open: true, remain: time.Hour},

		// New York springs forward on Sunday 2025-03-09 at 02:00 EST -> 03:00 EDT.
		{name: "new york spring: 01:00-03:00 lasts 1h", w: Window{Days: allDays, Start: hm(1, 0), End: hm(3, 0), Location: newYork},
			now: "2025-03-09T06:00:00Z" /* 01:00 EST */, open: true, remain: time.Hour},
		{name: "new york spring: 03:00 EDT closed", w: Window{Days: allDays, Start: hm(1, 0), End: hm(3, 0), Location: newYork},
			now: "2025-03-09T07:00:00Z", nextOpn: "2025-03-10T05:00:00Z" /* 01:00 EDT */},
		// New York falls back on Sunday 2025-11-02 at 02:00 EDT -> 01:00 EST.
		{name: "new york fall: saturday 23:00-03:00 lasts 5h", w: Window{Days: []time.Weekday{time.Saturday}, Start: hm(23, 0), End: hm(3, 0), Location: newYork},
			now: "2025-11-02T03:00:00Z" /* sat 23:00 EDT */, open: true, remain: 5 * time.Hour},
		{name: "new york fall: still open at 01:30 EST", w: Window{Days: []time.Weekday{time.Saturday}, Start: hm(23, 0), End: hm(3, 0), Location: newYork},
			now: "2025-11-02T06:30:00Z", open: true, remain: 90 * time.Minute},

		{name: "tokyo: monday morning is sunday in UTC", w: Window{Days: []time.Weekday{time.Monday}, Start: hm(9, 0), End: hm(10, 0), Location: tokyo},
			now: "2025-01-06T00:30:00Z" /* mon 09:30 JST */, open: true, remain: 30 * time.Minute},
		{name: "tokyo: monday in UTC is too late", w: Window{Days: []time.Weekday{time.Monday}, Start: hm(9, 0), End: hm(10, 0), Location: tokyo},
			now: "2025-01-06T09:30:00Z" /* mon 18:30 JST */, nextOpn: "2025-01-13T00:00:00Z"},
		{name: "no days never opens", w: Window{Start: 0, End: hm(1, 0)}, now: "2025-01-06T00:30:00Z", nextOpn: "never"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := at(t, tt.now)
			s := Schedule{tt.w}
			if got := s.Open(now); got != tt.open {
				t.Errorf("Open(%s) = %v, want %v", tt.now, got, tt.open)
			}
			if got := s.Remaining(now); got != tt.remain {
				t.Errorf("Remaining(%s) = %v, want %v", tt.now, got, tt.remain)
			}
			want := now
			switch tt.nextOpn {
			case "":
			case "never":
				want = time.Time{}
			default:
				want = at(t, tt.nextOpn)
			}
			if got := s.NextOpen(now); !got.Equal(want) {
				t.Errorf("NextOpen(%s) = %v, want %v", tt.now, got, want)
			}
		})
	}
}

func TestScheduleRemaining(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	mon := []time.Weekday{time.Monday}
	w := func(start, end time.Duration) Window { return Window{Days: mon, Start: start, End: end} }
	now := "2025-01-06T21:00:00Z" // Monday

	tests := []struct {
		name   string
		s      Schedule
		now    string
		remain time.Duration
	}{
		{name: "empty schedule is always open", s: nil, now: now, remain: Horizon},
		{name: "single", s: Schedule{w(hm(20, 0), hm(22, 0))}, now: now, remain: time.Hour},
		{name: "adjacent windows merge", s: Schedule{w(hm(20, 0), hm(22, 0)), w(hm(22, 0), hm(23, 30))}, now: now, remain: 150 * time.Minute},
		{name: "order does not matter", s: Schedule{w(hm(22, 0), hm(23, 30)), w(hm(20, 0), hm(22, 0))}, now: now, remain: 150 * time.Minute},
		{name: "overlapping windows merge", s: Schedule{w(hm(20, 0), hm(22, 0)), w(hm(21, 30), hm(23, 0))}, now: now, remain: 2 * time.Hour},
		{name: "contained window does not shorten", s: Schedule{w(hm(20, 0), hm(23, 0)), w(hm(21, 0), hm(21, 30))}, now: now, remain: 2 * time.Hour},
		{name: "gap stops the merge", s: Schedule{w(hm(20, 0), hm(22, 0)), w(hm(22, 1), hm(23, 0))}, now: now, remain: time.Hour},
		{name: "chain across midnight", s: Schedule{
			w(hm(20, 0), 24*time.Hour),
			{Days: []time.Weekday{time.Tuesday}, Start: 0, End: hm(3, 0)},
		}, now: now, remain: 6 * time.Hour},
		{name: "adjacent across zones", s: Schedule{
			w(hm(20, 0), hm(22, 0)),
			{Days: mon, Start: hm(23, 0), End: hm(23, 30), Location: berlin}, // 22:00-22:30 UTC in winter
		}, now: now, remain: 90 * time.Minute},
		{name: "every day all day is capped", s: Schedule{{Days: allDays, Start: 0, End: 24 * time.Hour}}, now: now, remain: Horizon},
		{name: "daily 24h windows are capped", s: Schedule{{Days: allDays, Start: hm(6, 0), End: hm(6, 0)}}, now: now, remain: Horizon},
		{name: "six full days", s: Schedule{{Days: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}, Start: 0, End: 24 * time.Hour}},
			now: now, remain: 5*24*time.Hour + 3*time.Hour},
		{name: "closed is zero", s: Schedule{w(hm(22, 0), hm(23, 0))}, now: now, remain: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := at(t, tt.now)
			if got := tt.s.Remaining(n); got != tt.remain {
				t.Errorf("Remaining = %v, want %v", got, tt.remain)
			}
			if got, want := tt.s.Open(n), tt.remain > 0; got != want {
				t.Errorf("Open = %v, want %v", got, want)
			}
		})
	}
}

func TestScheduleNextOpen(t *testing.T) {
	s := Schedule{
		{Days: []time.Weekday{time.Wednesday}, Start: hm(1, 0), End: hm(2, 0)},
		{Days: []time.Weekday{time.Tuesday}, Start: hm(23, 0), End: hm(1, 0)},
	}
	// Monday: the Tuesday window comes first.
	if got, want := s.NextOpen(at(t, "2025-01-06T12:00:00Z")), at(t, "2025-01-07T23:00:00Z"); !got.Equal(want) {
		t.Errorf("NextOpen = %v, want %v", got, want)
	}
	// Wednesday 01:00 is inside the merged Tuesday 23:00 - Wednesday 02:00.
	now := at(t, "2025-01-08T01:00:00Z")
	if got := s.NextOpen(now); !got.Equal(now) {
		t.Errorf("NextOpen while open = %v, want now", got)
	}
	if got := s.Remaining(at(t, "2025-01-07T23:30:00Z")); got != 150*time.Minute {
		t.Errorf("Remaining = %v, want 2h30m", got)
	}
}

func TestCanStartDrain(t *testing.T) {
	night := Schedule{{Name: "night", Days: allDays, Start: hm(22, 0), End: hm(4, 0)}}
	tests := []struct {
		name     string
		s        Schedule
		now      string
		deadline time.Duration
		ok       bool
		reason   string
	}{
		{name: "enough time", s: night, now: "2025-01-06T22:00:00Z", deadline: time.Hour, ok: true},
		{name: "exactly enough", s: night, now: "2025-01-07T03:00:00Z", deadline: time.Hour, ok: true},
		{name: "too late in the window", s: night, now: "2025-01-07T03:30:00Z", deadline: time.Hour, reason: "closes in 30m0s"},
		{name: "closed", s: night, now: "2025-01-07T12:00:00Z", deadline: time.Hour, reason: "next opens at 2025-01-07T22:00:00Z"},
		{name: "always open allows any deadline", s: nil, now: "2025-01-07T12:00:00Z", deadline: 30 * 24 * time.Hour, ok: true},
		{name: "never opens", s: Schedule{{Start: 0, End: hm(1, 0)}}, now: "2025-01-07T12:00:00Z", deadline: time.Hour, reason: "never open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := tt.s.CanStartDrain(at(t, tt.now), tt.deadline)
			if ok != tt.ok {
				t.Fatalf("CanStartDrain = %v (%q), want %v", ok, reason, tt.ok)
			}
			if ok && reason != "" {
				t.Errorf("reason %q with ok", reason)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", reason, tt.reason)
			}
		})
	}
}

func TestParseClock(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "00:00", want: 0},
		{in: "22:00", want: hm(22, 0)},
		{in: "9:05", want: hm(9, 5)},
		{in: "04:30:15", want: hm(4, 30) + 15*time.Second},
		{in: "24:00", want: 24 * time.Hour},
		{in: "24:00:00", want: 24 * time.Hour},
		{in: "24:01", wantErr: true},
		{in: "25:00", wantErr: true},
		{in: "12:60", wantErr: true},
		{in: "12:00:60", wantErr: true},
		{in: "12", wantErr: true},
		{in: "12:0", wantErr: true},
		{in: "noon", wantErr: true},
		{in: "", wantErr: true},
		{in: " 12:00", wantErr: true},
		{in: "-1:00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseClock(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseClock(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseClock(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if err == nil {
				if back, _ := ParseClock(FormatClock(got)); back != got {
					t.Errorf("FormatClock round trip: %q -> %v", FormatClock(got), back)
				}
			}
		})
	}
}

func TestParseWeekday(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Weekday
		wantErr bool
	}{
		{in: "mon", want: time.Monday},
		{in: "Monday", want: time.Monday},
		{in: "SUN", want: time.Sunday},
		{in: "saturday", want: time.Saturday},
		{in: "Thu", want: time.Thursday},
		{in: "thur", wantErr: true},
		{in: "lundi", wantErr: true},
		{in: "", wantErr: true},
		{in: "mo", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseWeekday(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseWeekday(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("ParseWeekday(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

package policy

import (
	"strings"
	"testing"
	"time"
)

func mustMonthDays(t *testing.T, specs ...string) []MonthDay {
	t.Helper()
	var out []MonthDay
	for _, s := range specs {
		md, err := ParseMonthDay(s)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		out = append(out, md)
	}
	return out
}

func TestMonthlyWindow(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	night := func(offset int, loc *time.Location, specs ...string) Window {
		return Window{Name: "m", Days: allDays, Monthly: mustMonthDays(t, specs...), OffsetDays: offset, Start: hm(22, 0), End: hm(4, 0), Location: loc}
	}
	day := func(offset int, specs ...string) Window {
		return Window{Name: "m", Days: allDays, Monthly: mustMonthDays(t, specs...), OffsetDays: offset, Start: 0, End: 24 * time.Hour}
	}
	weekdaysOnly := func(w Window) Window {
		w.Days = []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
		return w
	}
	// 2026: March 1 is a Sunday; the second Mondays are Jan 12, Feb 9, Mar 9,
	// Apr 13; Patch Tuesdays (Tuesday after the second Monday) Jan 13, Feb 10,
	// Mar 10, Apr 14.
	tests := []struct {
		name    string
		w       Window
		now     string
		open    bool
		nextOpn string // "" when open
	}{
		{name: "patch tuesday open", w: day(1, "mon#2"), now: "2026-03-10T12:00:00Z", open: true},
		{name: "second monday itself closed with offset", w: day(1, "mon#2"), now: "2026-03-09T12:00:00Z", nextOpn: "2026-03-10T00:00:00Z"},
		{name: "patch tuesday next month", w: day(1, "mon#2"), now: "2026-03-11T00:00:00Z", nextOpn: "2026-04-14T00:00:00Z"},
		{name: "second wednesday", w: day(0, "wed#2"), now: "2026-03-01T00:00:00Z", nextOpn: "2026-03-11T00:00:00Z"},
		{name: "first wednesday is not second", w: day(0, "wed#2"), now: "2026-03-04T12:00:00Z", nextOpn: "2026-03-11T00:00:00Z"},
		{name: "day 1 of the month", w: day(0, "1"), now: "2026-03-15T00:00:00Z", nextOpn: "2026-04-01T00:00:00Z"},
		// Days narrows monthly: the 1st when it is a weekday. March 1 2026 is
		// a Sunday, April 1 a Wednesday.
		{name: "the 1st on a weekday only", w: weekdaysOnly(day(0, "1")), now: "2026-02-28T00:00:00Z", nextOpn: "2026-04-01T00:00:00Z"},
		{name: "day 31 skips april", w: day(0, "31"), now: "2026-04-01T00:00:00Z", nextOpn: "2026-05-31T00:00:00Z"},
		{name: "last day of february", w: day(0, "last"), now: "2026-02-27T12:00:00Z", nextOpn: "2026-02-28T00:00:00Z"},
		{name: "last day in a leap year", w: day(0, "last"), now: "2028-02-28T12:00:00Z", nextOpn: "2028-02-29T00:00:00Z"},
		// A fifth Monday: March 2026 has Mondays 2, 9, 16, 23, 30; April has
		// 6, 13, 20, 27 (no fifth); the next is June 29.
		{name: "fifth monday exists", w: day(0, "mon#5"), now: "2026-03-30T01:00:00Z", open: true},
		{name: "fifth monday missing in april and may", w: day(0, "mon#5"), now: "2026-03-31T00:00:00Z", nextOpn: "2026-06-29T00:00:00Z"},
		{name: "last friday", w: day(0, "fri#last"), now: "2026-03-01T00:00:00Z", nextOpn: "2026-03-27T00:00:00Z"},
		// The offset carries into the next month: the last Friday of January
		// 2026 is the 30th, +3 is Monday February 2.
		{name: "offset crosses the month", w: day(3, "fri#last"), now: "2026-01-31T00:00:00Z", nextOpn: "2026-02-02T00:00:00Z"},
		{name: "negative offset: the day before the 1st", w: day(-1, "1"), now: "2026-03-30T00:00:00Z", nextOpn: "2026-03-31T00:00:00Z"},
		// Across midnight: opens on the second Saturday 22:00, still open on
		// Sunday 03:00. March 14 2026 is the second Saturday.
		{name: "monthly night open after midnight", w: night(0, nil, "sat#2"), now: "2026-03-15T03:00:00Z", open: true},
		// Year wrap: the first Monday after December's second Monday window.
		{name: "year wrap", w: day(0, "mon#1"), now: "2026-12-08T00:00:00Z", nextOpn: "2027-01-04T00:00:00Z"},
		// DST: Berlin springs forward on the last Sunday of March 2026 (Mar 29);
		// a window on that night opens at 22:00 CEST on the 29th.
		{name: "berlin dst: last sunday night", w: night(0, berlin, "sun#last"), now: "2026-03-28T12:00:00Z", nextOpn: "2026-03-29T20:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Schedule{tc.w}
			now := at(t, tc.now)
			if got := s.Open(now); got != tc.open {
				t.Fatalf("Open(%s) = %v, want %v", tc.now, got, tc.open)
			}
			want := now
			if !tc.open {
				want = at(t, tc.nextOpn)
			}
			if got := s.NextOpen(now); !got.Equal(want) {
				t.Fatalf("NextOpen(%s) = %s, want %s", tc.now, got.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
			}
		})
	}
}

func TestParseMonthDay(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "mon#2", want: "mon#2"},
		{in: "Tuesday#3", want: "tue#3"},
		{in: "FRI#last", want: "fri#last"},
		{in: "1", want: "1"},
		{in: "31", want: "31"},
		{in: "LAST", want: "last"},
		{in: "mon#6", err: "1 to 5 or last"},
		{in: "mon#0", err: "1 to 5 or last"},
		{in: "32", err: "not a day of the month"},
		{in: "0", err: "not a day of the month"},
		{in: "xyz#1", err: "unknown day"},
		{in: "TUE3", err: `use "mon#2"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			md, err := ParseMonthDay(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseMonthDay(%q) error = %v, want one with %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || md.String() != tc.want {
				t.Fatalf("ParseMonthDay(%q) = %v, %v; want %s", tc.in, md, err, tc.want)
			}
		})
	}
}

func mustFreeze(t *testing.T, name, from, to string, loc *time.Location) Freeze {
	t.Helper()
	f, err := ParseFreezeDate(from)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := ParseFreezeDate(to)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFreezeRange(f, tt); err != nil {
		t.Fatal(err)
	}
	return Freeze{Name: name, From: f, To: tt, Location: loc}
}

func TestFreezes(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	yearEnd := mustFreeze(t, "year-end", "12-20", "01-05", berlin)
	oneOff := mustFreeze(t, "launch", "2026-03-28", "2026-03-29", berlin)
	touching := mustFreeze(t, "launch-2", "2026-03-30", "2026-03-31", berlin)
	tests := []struct {
		name   string
		fs     Freezes
		now    string
		frozen string // the freeze named; "" when none is in force
		until  string
	}{
		{name: "before the yearly freeze", fs: Freezes{yearEnd}, now: "2026-12-19T22:59:59Z"},
		// Berlin is UTC+1 in winter: the freeze starts 2026-12-19T23:00Z.
		{name: "yearly freeze starts at local midnight", fs: Freezes{yearEnd}, now: "2026-12-19T23:00:00Z", frozen: "year-end", until: "2027-01-05T23:00:00Z"},
		{name: "year wrap: january is in last year's freeze", fs: Freezes{yearEnd}, now: "2027-01-03T12:00:00Z", frozen: "year-end", until: "2027-01-05T23:00:00Z"},
		{name: "after the freeze", fs: Freezes{yearEnd}, now: "2027-01-05T23:00:00Z"},
		// Berlin springs forward on 2026-03-29: the freeze ends at midnight
		// CEST on the 30th, 22:00Z.
		{name: "one-off across a dst change", fs: Freezes{oneOff}, now: "2026-03-28T12:00:00Z", frozen: "launch", until: "2026-03-29T22:00:00Z"},
		{name: "one-off over", fs: Freezes{oneOff}, now: "2026-04-01T00:00:00Z"},
		{name: "one-off in another year", fs: Freezes{oneOff}, now: "2027-03-28T12:00:00Z"},
		{name: "one-off with times", fs: Freezes{mustFreeze(t, "release", "2026-12-18T18:00", "2026-12-21T06:30", berlin)}, now: "2026-12-18T17:00:00Z",
			frozen: "release", until: "2026-12-21T05:30:00Z"},
		{name: "one-off with times: before its start", fs: Freezes{mustFreeze(t, "release", "2026-12-18T18:00", "2026-12-21T06:30", berlin)}, now: "2026-12-18T16:59:59Z"},
		{name: "touching freezes count as one", fs: Freezes{oneOff, touching}, now: "2026-03-29T12:00:00Z", frozen: "launch", until: "2026-03-31T22:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, until, ok := tc.fs.At(at(t, tc.now))
			if ok != (tc.frozen != "") || f.Name != tc.frozen {
				t.Fatalf("At(%s) = %q, %v; want %q", tc.now, f.Name, ok, tc.frozen)
			}
			if ok && !until.Equal(at(t, tc.until)) {
				t.Fatalf("At(%s) until %s, want %s", tc.now, until.UTC().Format(time.RFC3339), tc.until)
			}
		})
	}
}

func TestCalendarCanStartDrain(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	yearEnd := mustFreeze(t, "year-end", "12-20", "01-05", berlin)
	nights := Schedule{{Name: "nights", Days: allDays, Start: hm(22, 0), End: hm(4, 0)}}
	tests := []struct {
		name    string
		cal     Calendar
		now     string
		ok      bool
		reason  string
		recheck string
	}{
		{name: "no window, no freeze", cal: Calendar{}, now: "2026-12-24T12:00:00Z", ok: true},
		{name: "frozen", cal: Calendar{Freezes: Freezes{yearEnd}}, now: "2026-12-24T12:00:00Z",
			reason: "frozen until 2027-01-05T23:00:00Z (year-end)", recheck: "2027-01-05T23:00:00Z"},
		{name: "a freeze starts before the deadline", cal: Calendar{Freezes: Freezes{yearEnd}}, now: "2026-12-19T22:30:00Z",
			reason: "a freeze starts at 2026-12-19T23:00:00Z", recheck: "2027-01-05T23:00:00Z"},
		// The freeze ends at 2027-01-05T23:00Z, inside that night's window.
		{name: "window and freeze: first chance is the window after the freeze", cal: Calendar{Schedule: nights, Freezes: Freezes{yearEnd}},
			now: "2026-12-24T12:00:00Z", reason: "frozen until", recheck: "2027-01-05T23:00:00Z"},
		{name: "window closed, no freeze", cal: Calendar{Schedule: nights}, now: "2026-12-24T12:00:00Z",
			reason: "outside the maintenance windows", recheck: "2026-12-24T22:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why, recheck := tc.cal.CanStartDrain(at(t, tc.now), time.Hour)
			if ok != tc.ok || !strings.Contains(why, tc.reason) {
				t.Fatalf("CanStartDrain = %v, %q; want %v, %q", ok, why, tc.ok, tc.reason)
			}
			if tc.recheck == "" && !recheck.IsZero() || tc.recheck != "" && !recheck.Equal(at(t, tc.recheck)) {
				t.Fatalf("recheck = %s, want %s", recheck.UTC().Format(time.RFC3339), tc.recheck)
			}
		})
	}
}

func TestCalendarNextOpen(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	yearEnd := mustFreeze(t, "year-end", "12-20", "01-05", berlin)
	// Patch Tuesday, 22:00 to 04:00 Berlin time: January 2027's is the 12th.
	patch := Schedule{{Name: "patch", Days: allDays, Monthly: mustMonthDays(t, "mon#2"), OffsetDays: 1, Start: hm(22, 0), End: hm(4, 0), Location: berlin}}
	cal := Calendar{Schedule: patch, Freezes: Freezes{yearEnd}}
	// December 2026's Patch Tuesday (the 15th) is before the freeze.
	if got, want := cal.NextOpen(at(t, "2026-12-01T00:00:00Z")), at(t, "2026-12-15T21:00:00Z"); !got.Equal(want) {
		t.Fatalf("NextOpen = %s, want %s", got, want)
	}
	// A freeze over the only opening moves it to the next month.
	long := Calendar{Schedule: patch, Freezes: Freezes{mustFreeze(t, "dec", "12-10", "12-31", berlin)}}
	if got, want := long.NextOpen(at(t, "2026-12-01T00:00:00Z")), at(t, "2027-01-12T21:00:00Z"); !got.Equal(want) {
		t.Fatalf("NextOpen over a freeze = %s, want %s", got, want)
	}
}

func TestParseFreezeDate(t *testing.T) {
	tests := []struct{ in, err string }{
		{in: "12-20"},
		{in: "2026-12-20"},
		{in: "2028-02-29"},
		{in: "02-29", err: "only in leap years"},
		{in: "2026-02-29", err: "not a day of the calendar"},
		{in: "13-01", err: "not a day of the calendar"},
		{in: "12/20", err: `use "MM-DD"`},
		{in: "2026-12-18T18:00"},
		{in: "12-18T18:00", err: "only a one-off date may have a time"},
		{in: "2026-12-18T24:00", err: "the time must be"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseFreezeDate(tc.in)
			if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParseFreezeDate(%q) = %v, want %q", tc.in, err, tc.err)
			}
		})
	}
	if err := CheckFreezeRange(Date{Month: 12, Day: 20}, Date{Year: 2027, Month: 1, Day: 5}); err == nil {
		t.Fatal("a yearly from with a one-off to was accepted")
	}
	if err := CheckFreezeRange(Date{Year: 2027, Month: 1, Day: 5}, Date{Year: 2026, Month: 12, Day: 20}); err == nil {
		t.Fatal("a one-off freeze ending before it starts was accepted")
	}
}

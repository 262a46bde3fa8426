package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones must not depend on the host's zoneinfo
)

// Horizon caps Schedule.Remaining: a schedule that stays open for at least
// this long (for example an empty schedule, which is always open) reports
// Horizon, and CanStartDrain treats it as open for any drain deadline.
const Horizon = 7 * 24 * time.Hour

// Window is a recurring maintenance window: on each of Days, it opens at the
// wall-clock time Start and closes at the wall-clock time End in Location.
//
// Start and End are offsets from midnight. Start is in [0, 24h) and End in
// [0, 24h]. When End <= Start the window ends on the following day, so a
// Monday 22:00–04:00 window is open on Tuesday at 03:00; End == Start gives
// a 24-hour window. End = 24h closes the window at the following midnight.
//
// Times are wall-clock times, so across a daylight saving change a window
// is shorter or longer than usual in elapsed time. A wall-clock time that
// does not exist (skipped in spring) is moved forward by the length of the
// gap, and one that occurs twice (in autumn) means its later occurrence,
// as time.Date does.
type Window struct {
	// Name is the window's name in the configuration, used in reasons.
	Name string
	// Days lists the weekdays (in Location) on which the window opens.
	Days []time.Weekday
	// Start is the wall-clock opening time as an offset from midnight.
	Start time.Duration
	// End is the wall-clock closing time as an offset from midnight.
	End time.Duration
	// Location is the window's time zone; nil means UTC.
	Location *time.Location
	// Monthly, when not empty, narrows Days to the days of each month these
	// rules name (monthly.go), moved by OffsetDays: the window opens on a
	// day both name.
	Monthly []MonthDay
	// OffsetDays moves each day Monthly names by this many days (AWS SSM's
	// ScheduleOffset): "the Tuesday after the second Monday" is mon#2 with
	// an offset of 1. The day moved to may be in the next or previous month.
	OffsetDays int
}

// opensOn reports whether the window opens on the civil date y-m-d (d may
// be out of the month's range: time.Date normalises it).
func (w Window) opensOn(y int, m time.Month, d int) bool {
	// The weekday of a civil date does not depend on the zone.
	if !slices.Contains(w.Days, time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()) {
		return false
	}
	if len(w.Monthly) == 0 {
		return true
	}
	base := time.Date(y, m, d-w.OffsetDays, 12, 0, 0, 0, time.UTC)
	return slices.ContainsFunc(w.Monthly, func(md MonthDay) bool { return md.matches(base) })
}

// scanDays is how many days NextOpen looks ahead for the window's next
// opening: two weeks meet every listed weekday, even if a DST gap swallows
// one occurrence; a monthly rule may not match for months (a fifth weekday,
// day 31), but every rule matches within a year and a bit.
func (w Window) scanDays() int {
	if len(w.Monthly) == 0 {
		return 15
	}
	return 400 + max(w.OffsetDays, -w.OffsetDays)
}

// interval is one occurrence of a window: open in [start, end).
type interval struct {
	start, end time.Time
}

func (w Window) location() *time.Location {
	if w.Location == nil {
		return time.UTC
	}
	return w.Location
}

// occurrences returns the window's occurrences that open on the calendar
// days (in the window's zone) from the day of t plus fromDay to the day of t
// plus toDay, both included.
func (w Window) occurrences(t time.Time, fromDay, toDay int) []interval {
	loc := w.location()
	lt := t.In(loc)
	y, m, d := lt.Date()
	var out []interval
	for k := fromDay; k <= toDay; k++ {
		if !w.opensOn(y, m, d+k) {
			continue
		}
		start := wallClock(y, m, d+k, w.Start, loc)
		endDay := d + k
		if w.End <= w.Start {
			endDay++
		}
		end := wallClock(y, m, endDay, w.End, loc)
		if !end.After(start) {
			// Only possible when a DST gap swallows the whole window.
			continue
		}
		out = append(out, interval{start, end})
	}
	return out
}

func wallClock(y int, m time.Month, d int, off time.Duration, loc *time.Location) time.Time {
	off = off.Truncate(time.Second)
	h := int(off / time.Hour)
	mi := int(off % time.Hour / time.Minute)
	s := int(off % time.Minute / time.Second)
	return time.Date(y, m, d, h, mi, s, 0, loc)
}

// Schedule is a union of windows. An empty schedule is always open.
type Schedule []Window

// String says in which windows drains may start: the windows' names, or that
// they may start at any time (no window), as `policy apply`'s diff and `plan`
// show a group's effective windows.
func (s Schedule) String() string {
	if len(s) == 0 {
		return "any time (no window)"
	}
	names := make([]string, 0, len(s))
	for _, w := range s {
		names = append(names, strconv.Quote(w.Name))
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// Open reports whether any window of the schedule is open at now. An empty
// schedule is always open.
func (s Schedule) Open(now time.Time) bool {
	if len(s) == 0 {
		return true
	}
	for _, w := range s {
		for _, iv := range w.occurrences(now, -1, 0) {
			if !now.Before(iv.start) && now.Before(iv.end) {
				return true
			}
		}
	}
	return false
}

// Remaining returns how long the schedule stays open from now without
// interruption: 0 if it is closed, and at most Horizon. Windows that overlap
// or touch (one closes when the next opens) count as one.
func (s Schedule) Remaining(now time.Time) time.Duration {
	if len(s) == 0 {
		return Horizon
	}
	if !s.Open(now) {
		return 0
	}
	// Any occurrence that can matter opens between the day before now and
	// the day after now+Horizon, in every zone.
	days := int(Horizon/(24*time.Hour)) + 1
	var ivs []interval
	for _, w := range s {
		ivs = append(ivs, w.occurrences(now, -1, days)...)
	}
	slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
	end := now
	for _, iv := range ivs {
		if iv.start.After(end) {
			break
		}
		if iv.end.After(end) {
			end = iv.end
		}
		if end.Sub(now) >= Horizon {
			return Horizon
		}
	}
	return end.Sub(now)
}

// NextOpen returns now if the schedule is open at now, else the first time
// after now at which it opens, or the zero time if it never opens (all its
// windows have no days).
func (s Schedule) NextOpen(now time.Time) time.Time {
	if s.Open(now) {
		return now
	}
	var next time.Time
	for _, w := range s {
		for _, iv := range w.occurrences(now, 0, w.scanDays()) {
			if iv.start.After(now) && (next.IsZero() || iv.start.Before(next)) {
				next = iv.start
			}
		}
	}
	return next
}

// CanStartDrain reports whether a drain with the given deadline may start at
// now: the schedule must be open and stay open at least for the deadline, so
// that the drain can finish inside the window. When it may not, reason says
// why, in words for an operator.
func (s Schedule) CanStartDrain(now time.Time, deadline time.Duration) (ok bool, reason string) {
	if !s.Open(now) {
		next := s.NextOpen(now)
		if next.IsZero() {
			return false, "outside the maintenance windows, which never open"
		}
		return false, fmt.Sprintf("outside the maintenance windows (next opens at %s)", next.Format(time.RFC3339))
	}
	rem := s.Remaining(now)
	if rem >= Horizon || rem >= deadline {
		return true, ""
	}
	return false, fmt.Sprintf("the maintenance window closes in %s, before the drain deadline of %s could pass", rem, deadline)
}

var clockRE = regexp.MustCompile(`^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$`)

// ParseClock parses a wall-clock time "HH:MM" or "HH:MM:SS" into an offset
// from midnight. "24:00" (and "24:00:00") is accepted and gives 24h, which
// only makes sense as a window's end.
func ParseClock(s string) (time.Duration, error) {
	m := clockRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid time of day %q: use HH:MM or HH:MM:SS", s)
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	sec := 0
	if m[3] != "" {
		sec, _ = strconv.Atoi(m[3])
	}
	switch {
	case h > 24 || mi > 59 || sec > 59:
		return 0, fmt.Errorf("invalid time of day %q: out of range", s)
	case h == 24 && (mi != 0 || sec != 0):
		return 0, fmt.Errorf("invalid time of day %q: past 24:00", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second, nil
}

// FormatClock formats an offset from midnight as "HH:MM", or "HH:MM:SS" when
// it has seconds.
func FormatClock(d time.Duration) string {
	d = d.Truncate(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

// ParseWeekday parses an English day name, full or three letters, in any
// case: "mon", "Monday", "SUN".
func ParseWeekday(s string) (time.Weekday, error) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		full := d.String()
		if strings.EqualFold(s, full) || strings.EqualFold(s, full[:3]) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown day %q: use mon, tue, wed, thu, fri, sat, sun or full English names", s)
}

// ParseTimeZone loads a window's IANA time zone, refusing the names that do
// not name one: "" and "Local" would depend on the machine the coordinator
// runs on.
func ParseTimeZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, fmt.Errorf(`must name an IANA time zone such as "UTC" or "Europe/Berlin"`)
	case "Local":
		return nil, fmt.Errorf(`"Local" depends on the machine the coordinator runs on: name an IANA time zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"UTC\" or \"America/New_York\"", name)
	}
	return loc, nil
}

package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Freeze is a date range in which no drain starts (a change freeze, a
// holiday): from the start of From to the end of To, in Location, both days
// included. A yearly freeze recurs every year on the same month and day
// (Year 0 in From and To), and one whose To comes before its From in the year
// wraps into the next year ("12-20" to "01-05"). A one-off freeze has full
// dates.
//
// The bounds are wall-clock midnights: a freeze in a zone with daylight saving
// time starts and ends at local midnight whatever the offset that day.
type Freeze struct {
	// Name is the freeze's name in the policy, shown in reasons.
	Name string
	// From and To are the first and last civil day of the freeze; Year 0 in
	// both for a yearly freeze.
	From, To Date
	// Location is the freeze's time zone; nil means UTC.
	Location *time.Location
}

// Date is a civil date; Year 0 in a yearly freeze. A one-off freeze's date
// may have a wall-clock time (HasClock): the freeze then starts, or ends, at
// that time rather than at the day's start, or end.
type Date struct {
	Year     int
	Month    time.Month
	Day      int
	Clock    time.Duration
	HasClock bool
}

func (d Date) String() string {
	if d.HasClock {
		return fmt.Sprintf("%04d-%02d-%02dT%s", d.Year, int(d.Month), d.Day, FormatClock(d.Clock))
	}
	if d.Year == 0 {
		return fmt.Sprintf("%02d-%02d", int(d.Month), d.Day)
	}
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
}

// Yearly reports whether the freeze recurs every year.
func (f Freeze) Yearly() bool { return f.From.Year == 0 }

func (f Freeze) location() *time.Location {
	if f.Location == nil {
		return time.UTC
	}
	return f.Location
}

// spans returns the freeze's occurrences that may contain or follow t: the
// one-off freeze itself, or a yearly one's occurrences starting in the year
// before t's, t's own and the next.
func (f Freeze) spans(t time.Time) []interval {
	loc := f.location()
	span := func(fromYear, toYear int) interval {
		end := wallClock(toYear, f.To.Month, f.To.Day+1, 0, loc)
		if f.To.HasClock {
			end = wallClock(toYear, f.To.Month, f.To.Day, f.To.Clock, loc)
		}
		return interval{start: wallClock(fromYear, f.From.Month, f.From.Day, f.From.Clock, loc), end: end}
	}
	if !f.Yearly() {
		return []interval{span(f.From.Year, f.To.Year)}
	}
	wraps := f.To.Month < f.From.Month || (f.To.Month == f.From.Month && f.To.Day < f.From.Day)
	y := t.In(loc).Year()
	var out []interval
	for k := y - 1; k <= y+1; k++ {
		to := k
		if wraps {
			to++
		}
		out = append(out, span(k, to))
	}
	return out
}

// Freezes are the freezes that apply to a group.
type Freezes []Freeze

// At returns the freeze in force at now, with the end of the frozen time it
// belongs to: freezes that overlap or touch count as one, and the one named is
// the first found in force at now. ok is false when none is.
func (fs Freezes) At(now time.Time) (f Freeze, until time.Time, ok bool) {
	until = now
	for range 2 * len(fs) * 3 { // each occurrence extends the end at most once
		moved := false
		for _, fz := range fs {
			for _, iv := range fz.spans(until) {
				if !until.Before(iv.start) && until.Before(iv.end) {
					if !ok {
						f, ok = fz, true
					}
					until, moved = iv.end, true
				}
			}
		}
		if !moved {
			break
		}
	}
	return f, until, ok
}

// NextStart returns the first time after now at which a freeze starts, or the
// zero time if none does (no freezes, or one-off ones in the past).
func (fs Freezes) NextStart(now time.Time) time.Time {
	var next time.Time
	for _, f := range fs {
		for _, iv := range f.spans(now) {
			if iv.start.After(now) && (next.IsZero() || iv.start.Before(next)) {
				next = iv.start
			}
		}
	}
	return next
}

// Calendar is when a group's drains may start: its windows, less its freezes.
type Calendar struct {
	Schedule Schedule
	Freezes  Freezes
}

// Open reports whether a drain may start at now as far as the calendar goes.
func (c Calendar) Open(now time.Time) bool {
	if _, _, frozen := c.Freezes.At(now); frozen {
		return false
	}
	return c.Schedule.Open(now)
}

// Remaining is how long the calendar stays open from now: the schedule's
// Remaining, cut at the next freeze's start; 0 when closed, at most Horizon.
func (c Calendar) Remaining(now time.Time) time.Duration {
	if !c.Open(now) {
		return 0
	}
	rem := c.Schedule.Remaining(now)
	if next := c.Freezes.NextStart(now); !next.IsZero() && next.Sub(now) < rem {
		rem = next.Sub(now)
	}
	return rem
}

// NextOpen returns now if the calendar is open, else when it next opens (the
// first time the schedule is open and no freeze is in force), or the zero time
// if it never does within the look-ahead of a schedule (about a year).
func (c Calendar) NextOpen(now time.Time) time.Time {
	t := now
	for range 64 {
		if _, until, frozen := c.Freezes.At(t); frozen {
			t = until
		}
		t = c.Schedule.NextOpen(t)
		if t.IsZero() {
			return t
		}
		if _, _, frozen := c.Freezes.At(t); !frozen {
			return t
		}
	}
	return time.Time{}
}

// CanStartDrain is Schedule.CanStartDrain with the freezes: no drain starts in
// a freeze, nor when one starts before the drain deadline could pass. recheck
// is when the answer may change by itself: the freeze's end, the next
// opening (zero: it does not, or it is open).
func (c Calendar) CanStartDrain(now time.Time, deadline time.Duration) (ok bool, reason string, recheck time.Time) {
	if f, until, frozen := c.Freezes.At(now); frozen {
		return false, fmt.Sprintf("frozen until %s (%s)", until.UTC().Format(time.RFC3339), f.Name), until
	}
	if ok, why := c.Schedule.CanStartDrain(now, deadline); !ok {
		return false, why, c.nextChance(now)
	}
	if next := c.Freezes.NextStart(now); !next.IsZero() && next.Sub(now) < deadline {
		return false, fmt.Sprintf("a freeze starts at %s, before the drain deadline of %s could pass", next.UTC().Format(time.RFC3339), deadline), c.nextChance(now)
	}
	return true, "", time.Time{}
}

// nextChance is the next time after now at which the calendar opens anew: the
// end of the current open stretch's next opening, or its next opening.
func (c Calendar) nextChance(now time.Time) time.Time {
	t := now
	if c.Open(t) {
		t = t.Add(c.Remaining(t))
	}
	return c.NextOpen(t)
}

var dateRE = regexp.MustCompile(`^(?:([0-9]{4})-)?([0-9]{2})-([0-9]{2})(?:T(.+))?$`)

// dateForms is what ParseFreezeDate's errors show of the right forms.
const dateForms = `use "MM-DD" for a freeze every year ("12-20"), "YYYY-MM-DD" for one year ("2026-12-20"), or "YYYY-MM-DDTHH:MM" from or to a time of that day ("2026-12-18T18:00")`

// ParseFreezeDate parses a freeze's from or to: "MM-DD" (Year 0: every year)
// or "YYYY-MM-DD". February 29 is refused in a yearly freeze: most years do
// not have it.
func ParseFreezeDate(s string) (Date, error) {
	m := dateRE.FindStringSubmatch(s)
	if m == nil {
		return Date{}, fmt.Errorf("%q is not a date: %s", s, dateForms)
	}
	var d Date
	if m[1] != "" {
		d.Year, _ = strconv.Atoi(m[1])
	}
	if m[4] != "" {
		if d.Year == 0 {
			return Date{}, fmt.Errorf("%q: only a one-off date may have a time: %s", s, dateForms)
		}
		c, err := ParseClock(m[4])
		if err != nil || c >= 24*time.Hour {
			return Date{}, fmt.Errorf("%q: the time must be HH:MM or HH:MM:SS, 00:00 to 23:59:59: %s", s, dateForms)
		}
		d.Clock, d.HasClock = c, true
	}
	mo, _ := strconv.Atoi(m[2])
	d.Month = time.Month(mo)
	d.Day, _ = strconv.Atoi(m[3])
	check := d.Year
	if check == 0 {
		check = 2001 // a year without February 29
	}
	if mo < 1 || mo > 12 || d.Day < 1 || time.Date(check, d.Month, d.Day, 12, 0, 0, 0, time.UTC).Day() != d.Day {
		if d.Year == 0 && mo == 2 && d.Day == 29 {
			return Date{}, fmt.Errorf(`"02-29" exists only in leap years: a yearly freeze must use "02-28" or "03-01"`)
		}
		return Date{}, fmt.Errorf("%q is not a day of the calendar: %s", s, dateForms)
	}
	return d, nil
}

// CheckFreezeRange checks a freeze's from and to together: both yearly or both
// full dates, and a one-off freeze not ending before it starts.
func CheckFreezeRange(from, to Date) error {
	switch {
	case (from.Year == 0) != (to.Year == 0):
		return fmt.Errorf(`from %q and to %q must both be "MM-DD" (every year) or both "YYYY-MM-DD" (once)`, from, to)
	case from.Year != 0 && slices.Compare([]int{to.Year, int(to.Month), to.Day}, []int{from.Year, int(from.Month), from.Day}) < 0:
		return fmt.Errorf("to %s is before from %s: a one-off freeze ends on or after the day it starts", to, from)
	case to.HasClock && slices.Compare([]int{to.Year, int(to.Month), to.Day, int(to.Clock)}, []int{from.Year, int(from.Month), from.Day, int(from.Clock)}) <= 0:
		return fmt.Errorf("to %s is not after from %s: the freeze would be empty", to, from)
	}
	return nil
}

// FreezeInForce is one occurrence of a freeze in force: its own span (not
// merged with freezes that overlap it) and the groups it holds.
type FreezeInForce struct {
	Name string
	// Groups are the groups the freeze holds, in the order given.
	Groups     []string
	Start, End time.Time
}

// occurrence returns the occurrence of f in force at now.
func (f Freeze) occurrence(now time.Time) (interval, bool) {
	for _, iv := range f.spans(now) {
		if !now.Before(iv.start) && now.Before(iv.end) {
			return iv, true
		}
	}
	return interval{}, false
}

// InForce returns the freezes of groups in force at now, each once with every
// group it holds, sorted by name (freeze names are unique in a policy).
func InForce(groups []Group, now time.Time) []FreezeInForce {
	byName := map[string]int{}
	var out []FreezeInForce
	for _, g := range groups {
		for _, f := range g.Freezes {
			iv, ok := f.occurrence(now)
			if !ok {
				continue
			}
			i, seen := byName[f.Name]
			if !seen {
				i = len(out)
				byName[f.Name] = i
				out = append(out, FreezeInForce{Name: f.Name, Start: iv.start, End: iv.end})
			}
			out[i].Groups = append(out[i].Groups, g.Name)
		}
	}
	slices.SortFunc(out, func(a, b FreezeInForce) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NextFreezeChange returns the first time after now at which a freeze of
// groups starts or ends, or the zero time if none does: what InForce says
// changes only then.
func NextFreezeChange(groups []Group, now time.Time) time.Time {
	var next time.Time
	for _, g := range groups {
		for _, f := range g.Freezes {
			for _, iv := range f.spans(now) {
				for _, t := range []time.Time{iv.start, iv.end} {
					if t.After(now) && (next.IsZero() || t.Before(next)) {
						next = t
					}
				}
			}
		}
	}
	return next
}

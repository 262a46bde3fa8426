package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MonthDay names one day of each month on which a monthly window opens:
// the nth weekday of the month (AKS relativeMonthly, SSM's cron `TUE#3`),
// or a day of the month by number (AKS absoluteMonthly). Last counts from
// the month's end: the last Friday, the last day.
type MonthDay struct {
	// Weekday and Nth: the Nth (1 to 5) Weekday of the month; Nth 0: a day
	// by number instead.
	Weekday time.Weekday
	Nth     int
	// Day is the day of the month, 1 to 31, when Nth is 0.
	Day int
	// Last: the month's last Weekday (Nth 0 and Day 0 then), or with
	// neither Weekday nor Day set, its last day.
	Last bool
	// ByWeekday tells "fri#last" (true) from "last" (false).
	ByWeekday bool
}

// matches reports whether the civil date of t (read in UTC, as the window
// code builds it) is the day md names in t's month. A fifth weekday or a day
// 31 that a month does not have matches nothing in that month.
func (md MonthDay) matches(t time.Time) bool {
	y, m, d := t.Date()
	lastDay := time.Date(y, m+1, 0, 12, 0, 0, 0, time.UTC).Day()
	switch {
	case md.ByWeekday && t.Weekday() != md.Weekday:
		return false
	case md.ByWeekday && md.Last:
		return d+7 > lastDay
	case md.ByWeekday:
		return (d-1)/7+1 == md.Nth
	case md.Last:
		return d == lastDay
	}
	return d == md.Day
}

// String is the rule as ParseMonthDay reads it.
func (md MonthDay) String() string {
	switch {
	case md.ByWeekday && md.Last:
		return strings.ToLower(md.Weekday.String()[:3]) + "#last"
	case md.ByWeekday:
		return strings.ToLower(md.Weekday.String()[:3]) + "#" + strconv.Itoa(md.Nth)
	case md.Last:
		return "last"
	}
	return strconv.Itoa(md.Day)
}

// monthDayForms is what ParseMonthDay's errors show of the right forms.
const monthDayForms = `use "mon#2" (the second Monday; #1 to #5, or #last), "1" (day 1 of the month; 1 to 31) or "last" (the month's last day)`

// ParseMonthDay parses a rule of a monthly window: "WEEKDAY#N" (N 1 to 5, or
// "last"), a day number 1 to 31, or "last".
func ParseMonthDay(s string) (MonthDay, error) {
	if strings.EqualFold(s, "last") {
		return MonthDay{Last: true}, nil
	}
	day, nth, ok := strings.Cut(s, "#")
	if !ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 31 {
			return MonthDay{}, fmt.Errorf("%q is not a day of the month: %s", s, monthDayForms)
		}
		return MonthDay{Day: n}, nil
	}
	wd, err := ParseWeekday(day)
	if err != nil {
		return MonthDay{}, fmt.Errorf("%q: %v; %s", s, err, monthDayForms)
	}
	if strings.EqualFold(nth, "last") {
		return MonthDay{Weekday: wd, Last: true, ByWeekday: true}, nil
	}
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 || n > 5 {
		return MonthDay{}, fmt.Errorf("%q: the week must be 1 to 5 or last; %s", s, monthDayForms)
	}
	return MonthDay{Weekday: wd, Nth: n, ByWeekday: true}, nil
}

// MaxOffsetDays bounds a monthly window's offset_days either way: four weeks
// moves a day by less than a month's worth of rules.
const MaxOffsetDays = 27

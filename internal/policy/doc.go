// Package policy holds rollboot's pure decisions and the typed values they
// are made with: the groups (compiled node filters, budgets, schedules),
// whether a maintenance window is open and for how long, how many hosts of a
// group may be out of service at once, which pending hosts may start now, and
// how long to back off after a failure. Its parsers (ParseClock,
// ParseWeekday, ParseTimeZone, ParsePercent, CompileFilter) turn the
// configuration's strings into those values; package config calls them once,
// in config.Compile, and adds where each value was written.
//
// Nothing here does I/O or reads the clock (ParseTimeZone only loads zone
// data): the current time and the observed cluster state are passed in, and
// decisions are returned as plain values. The coordinator loads state, calls
// these functions and applies the result to Nomad.
package policy

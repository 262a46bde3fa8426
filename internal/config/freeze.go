package config

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/rollboot/rollboot/internal/policy"
)

// FreezeConfig is one `freeze "name" {}` block: a date range in which no
// drain starts.
type FreezeConfig struct {
	Name     string
	From     string // "MM-DD" (every year) or "YYYY-MM-DD" (once)
	To       string // the same form; its day is included
	TimeZone string // IANA name
	// Groups it applies to; empty: every group (rollout-wide).
	Groups []string
}

var freezeTable = &table{typ: "freeze", of: reflect.TypeFor[FreezeConfig](), label: "Name",
	labelDoc: "The freeze's name, shown in the reason hosts wait (`frozen until T (year-end)`). Required, unique.",
	settings: []setting{
		{name: "from", field: "From", required: `"12-20"`, check: value(freezeDate),
			doc: "First day of the freeze, from midnight in `time_zone`: `\"MM-DD\"` for a freeze every year or " +
				"`\"YYYY-MM-DD\"` for one year, or `\"YYYY-MM-DDTHH:MM\"` (or `:SS`) to start at that time of the day. " +
				"`\"02-29\"` is refused in a yearly freeze (most years do not have it)."},
		{name: "to", field: "To", required: `"01-05"`, check: freezeTo,
			doc: "Last day of the freeze, included (it ends at the following midnight), in the same form as " +
				"`from`; `\"YYYY-MM-DDTHH:MM\"` ends the freeze at that time instead. A yearly freeze whose `to` comes before its `from` runs into the next year (`\"12-20\"` " +
				"to `\"01-05\"`); a one-off freeze must not end before it starts."},
		{name: "time_zone", field: "TimeZone", def: "UTC", check: value(timeZone),
			doc: "IANA time zone name of the dates, as for a window."},
		{name: "groups", field: "Groups", check: each(atElement, checkFreezeGroup),
			doc: "The groups the freeze holds (`\"default\"` for the nodes no group matches). `[]` (the default): " +
				"every group. While a freeze is in force no drain starts in the groups it holds; hosts already " +
				"out finish their cycle. Pending hosts wait with the reason `frozen until T (NAME)`, " +
				"`rollboot_hosts_waiting{reason=\"group_budget\"}`, and `plan` counts the freeze in its estimates. " +
				"A drain also does not start when a freeze begins before its deadline could pass. A " +
				"`rollboot request -urgent` skips freezes."},
	},
}

func freezeDate(s string) error {
	_, err := policy.ParseFreezeDate(s)
	return err
}

// freezeTo checks a freeze's to, and with it the range.
func freezeTo(val any, in siblings) error {
	to, err := policy.ParseFreezeDate(val.(string))
	if err != nil {
		return err
	}
	f, ok := in.get("from")
	from, ferr := policy.ParseFreezeDate(f.(string))
	if !ok || ferr != nil {
		return nil // reported at from
	}
	return policy.CheckFreezeRange(from, to)
}

func checkFreezeGroup(string) error { return nil } // checked against the groups: validator.freezes

// freezes checks the freezes' names and the groups they name.
func (v *validator) freezes() {
	first := map[string]int{}
	defined := map[string]bool{policy.DefaultGroupName: true}
	for _, g := range v.c.Groups {
		defined[g.Name] = true
	}
	for i, fc := range v.c.Freezes {
		s := labelScope("freeze", i, fc.Name)
		v.uniqueLabel("freeze", i, fc.Name, first)
		for k, g := range fc.Groups {
			if !defined[g] && v.good(s.sub("groups")) {
				v.report(s.sub("groups"), elem(k, fmt.Errorf("unknown group %q: defined groups are %s", g, quotedKeys(defined))))
			}
		}
	}
}

// compileFreezes returns the freezes that hold group name.
func (c *Config) compileFreezes(name string) policy.Freezes {
	var out policy.Freezes
	for _, fc := range c.Freezes {
		if len(fc.Groups) > 0 && !slices.Contains(fc.Groups, name) {
			continue
		}
		f := policy.Freeze{Name: fc.Name}
		f.From, _ = policy.ParseFreezeDate(fc.From)
		f.To, _ = policy.ParseFreezeDate(fc.To)
		f.Location, _ = policy.ParseTimeZone(fc.TimeZone)
		out = append(out, f)
	}
	return out
}

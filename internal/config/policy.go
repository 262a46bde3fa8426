package config

import (
	"fmt"

	"github.com/rollboot/rollboot/internal/policy"
)

// PolicyGroups builds the groups the coordinator decides with: the
// configured groups in file order, then the implicit group "default"
// (concurrency 1, no max_unavailable, the default schedule) for the nodes
// that no group matches. Filters are compiled and windows resolved. It
// returns Validate's errors if the configuration is not valid.
//
// A group that lists no windows gets the default schedule: every window
// defined, or always open if there is none.
func (c *Config) PolicyGroups() ([]policy.Group, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	windows := map[string]policy.Window{}
	var all policy.Schedule
	for _, wc := range c.Windows {
		w, err := compileWindow(wc)
		if err != nil {
			return nil, err // unreachable after Validate
		}
		windows[wc.Name] = w
		all = append(all, w)
	}
	var groups []policy.Group
	for _, gc := range c.Groups {
		g := policy.Group{Name: gc.Name, Concurrency: gc.Concurrency, Schedule: all}
		if gc.Filter != "" {
			f, err := policy.CompileFilter(gc.Filter)
			if err != nil {
				return nil, fmt.Errorf("group %q: %w", gc.Name, err)
			}
			g.Filter = f
		}
		pct, err := parsePercent(gc.MaxUnavailable)
		if err != nil {
			return nil, fmt.Errorf("group %q: %w", gc.Name, err)
		}
		g.MaxUnavailablePct = pct
		if len(gc.Windows) > 0 {
			g.Schedule = nil
			for _, name := range gc.Windows {
				g.Schedule = append(g.Schedule, windows[name])
			}
		}
		groups = append(groups, g)
	}
	groups = append(groups, policy.Group{Name: policy.DefaultGroupName, Concurrency: 1, Schedule: all})
	return groups, nil
}

// compileWindow converts a window block into a policy.Window.
func compileWindow(wc WindowConfig) (policy.Window, error) {
	w := policy.Window{Name: wc.Name}
	if len(wc.Days) == 0 {
		return w, fmt.Errorf("window %q: no days", wc.Name)
	}
	for _, d := range wc.Days {
		day, err := policy.ParseWeekday(d)
		if err != nil {
			return w, fmt.Errorf("window %q: %w", wc.Name, err)
		}
		w.Days = append(w.Days, day)
	}
	var err error
	if w.Start, err = policy.ParseClock(wc.Start); err != nil {
		return w, fmt.Errorf("window %q: start: %w", wc.Name, err)
	}
	if w.End, err = policy.ParseClock(wc.End); err != nil {
		return w, fmt.Errorf("window %q: end: %w", wc.Name, err)
	}
	if w.Location, err = loadLocation(wc.TimeZone); err != nil {
		return w, fmt.Errorf("window %q: time_zone: %w", wc.Name, err)
	}
	return w, nil
}

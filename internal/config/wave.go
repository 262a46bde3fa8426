package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/wave"
)

// CanaryConfig is a group's canary block: the first hosts of each wave (hosts
// needing a reboot for the same thing) go first and the rest wait until they
// have been back for soak (package wave).
type CanaryConfig struct {
	Hosts int
	Soak  time.Duration
}

var canaryTable = &table{typ: "canary", of: reflect.TypeFor[CanaryConfig](), settings: []setting{
	{name: "hosts", field: "Hosts", check: value(atLeast(0, "")),
		doc: "How many hosts of each wave of the group go first, as its canaries. A *wave* is the group's " +
			"hosts that need a reboot for the same thing: the fingerprint their agent publishes with the " +
			"need (the newest kernel, the hash of the packages that ask for the reboot, the sentinel " +
			"command's output); a new fingerprint is a new wave with its own canaries. The first hosts of a " +
			"wave in the group's line are its canaries (recorded in `<prefix>/waves` when they are granted, " +
			"so a new leader keeps them); the others wait (`waiting for canary HOST`) until every canary " +
			"is back and healthy, then for `soak` (`canary soak until T`). A canary whose cycle fails (it " +
			"ends `stuck`, its reboot fails on the host, its drain is aborted, its node is gone, or it is " +
			"back with its workloads unhealthy at the healthy deadline) holds the rest of its wave " +
			"(`canary failed: …`, `rollboot_hosts_waiting{reason=\"canary_failed\"}`) and halts its " +
			"group, as an exhausted failure budget does (`halted: …`, `rollboot_halted`), until " +
			"`rollboot resume -group G`: the resume forgets the failure, and the wave picks new canaries. " +
			"A new fingerprint starts a new wave, which the halt holds too. A host whose need has no fingerprint (a manual request, " +
			"`max_uptime`, a detector that cannot tell) is in no wave and goes as before. The verdict " +
			"comes from the cycle rollboot ran, never from a record; the fingerprint is the host's claim, " +
			"and decides only which wave that host is in. If `<prefix>/waves` cannot be read or written, " +
			"the groups with canaries or `after` start no host of a wave, and say why. `0`: no canaries. " +
			">= 0."},
	{name: "soak", field: "Soak", check: value(nonNegative),
		doc: "How long the last canary of a wave must have been back (its cycle ended, healthy) before the " +
			"rest of the wave starts. `rollboot plan` shows it (`canary soak until T`) and its estimates " +
			"count it. >= 0."},
}}

// afterSettings are the group's settings of the order between groups.
var afterSettings = []setting{
	{name: "after", field: "After",
		doc: "Groups that must have **finished** a wave before this group starts it: `after = " +
			"[\"staging\"]`. A group has finished a wave (a fingerprint) when none of its hosts is pending " +
			"with that fingerprint, none of the hosts it granted in that wave is still out (or stuck), its " +
			"canaries (if any) are back and at least one of its hosts came back healthy in it; the time is " +
			"recorded in `<prefix>/waves`. A host held by it says `after \"staging\": …`. A followed group " +
			"none of whose hosts has needed that fingerprint holds the wave for `after_soak` from when this " +
			"group first had it (time for the followed group to show the need if it gets the same update), " +
			"then lets it go: name the same detectors in both groups so that the same update has the same " +
			"fingerprint. A followed group whose canary failed holds the wave. Each name must be another " +
			"group of the file or `default`; the groups may not follow each other in a cycle."},
	{name: "after_soak", field: "AfterSoak", check: value(nonNegative),
		doc: "How long after the groups in `after` finished a wave this group starts it (`after \"staging\": " +
			"… soak until T`). >= 0."},
}

// WaveRules is a group's wave settings, checked.
func (gc GroupConfig) WaveRules() wave.GroupRules {
	return wave.GroupRules{Canaries: gc.Canary.Hosts, Soak: gc.Canary.Soak, After: slices.Clone(gc.After), AfterSoak: gc.AfterSoak}
}

// WaveRules are every group's wave settings (package wave), checked.
func (c *Config) WaveRules() wave.Rules {
	r := wave.Rules{}
	for _, g := range c.Groups {
		if gr := g.WaveRules(); gr.Canaries > 0 || len(gr.After) > 0 {
			r[g.Name] = gr
		}
	}
	return r
}

// groupsAfter checks each group's after: known groups, not itself, no cycle.
func (v *validator) groupsAfter() {
	known := map[string]bool{policy.DefaultGroupName: true}
	for _, g := range v.c.Groups {
		known[g.Name] = true
	}
	for i, g := range v.c.Groups {
		key := labelScope("group", i, g.Name).sub("after")
		if !v.good(key) {
			continue
		}
		var errs []error
		for k, name := range g.After {
			switch {
			case name == g.Name:
				errs = append(errs, elem(k, fmt.Errorf("group %q cannot follow itself: remove it from after", name)))
			case !known[name]:
				errs = append(errs, elem(k, fmt.Errorf("unknown group %q: after names groups of this file (or %q)", name, policy.DefaultGroupName)))
			}
		}
		if len(errs) > 0 {
			v.report(key, errors.Join(errs...))
			continue
		}
		if cycle := afterCycle(v.c.Groups, g.Name); cycle != nil {
			v.errorf(key, "the groups follow each other in a cycle (%s): no group of it could ever start a wave; remove one of the after entries",
				strings.Join(cycle, " after "))
		}
	}
}

// afterCycle returns a cycle of after through group from (from, ..., from), or
// nil.
func afterCycle(groups []GroupConfig, from string) []string {
	after := map[string][]string{}
	for _, g := range groups {
		if _, dup := after[g.Name]; !dup {
			after[g.Name] = g.After
		}
	}
	var path []string
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(g string) bool {
		path = append(path, g)
		for _, next := range after[g] {
			if next == from {
				path = append(path, from)
				return true
			}
			if !seen[next] {
				seen[next] = true
				if walk(next) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(from) {
		return path
	}
	return nil
}

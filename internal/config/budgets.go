package config

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// FailureBudgetConfig is a failure_budget block, at the top level (the whole
// rollout) or in a group: after max_failures failed cycles of the kinds
// counted within window, the scope halts until `rollboot resume`.
type FailureBudgetConfig struct {
	MaxFailures int
	Window      time.Duration
	Count       []string
}

// RolloutConfig is the rollout block: caps on all groups together.
type RolloutConfig struct {
	MaxOut           int
	MaxDrainsPerHour int
}

var failureKindNames = func() []string {
	out := make([]string, len(policy.FailureKinds))
	for i, k := range policy.FailureKinds {
		out[i] = string(k)
	}
	return out
}()

var failureBudgetTable = &table{typ: "failure_budget", of: reflect.TypeFor[FailureBudgetConfig](), settings: []setting{
	{name: "max_failures", field: "MaxFailures", check: value(atLeast(0, "")),
		doc: "How many failed cycles, of the kinds `count` names, within `window` halt the scope: no new drain " +
			"starts there (its pending hosts wait with the reason `halted: ...`, naming each failed host and how it " +
			"failed, and what lifts it), the hosts already out finish their cycle, the `halted` notification and " +
			"`rollboot_halted{scope}` fire, and `rollboot status`, `plan` and the status page show it at the top. " +
			"Only `rollboot resume` (the whole rollout) or `rollboot resume -group G` (a group) lifts it, recorded " +
			"with the token's name; the failures before it no longer count. A failure is the coordinator's own " +
			"verdict on a cycle it ran, never a host's claim. The halt is stored (`<prefix>/halts`), so a new " +
			"leader keeps it; while that state cannot be read, no drain starts at all (`halt_unknown`). A halt " +
			"stays until resumed, also when its budget is removed from the policy. `0` (the default): no " +
			"budget. At least 0."},
	{name: "window", field: "Window", def: 24 * time.Hour, check: value(positive),
		doc: "The time within which failures count: a failure older than this no longer counts, but a halt, once " +
			"made, stays until resumed. > 0."},
	{name: "count", field: "Count", def: failureKindNames, check: value(failureKinds),
		doc: "The kinds of failure that count: `\"stuck\"` (the host did not come back within `rejoin_timeout`, " +
			"or its agent did not start the reboot: it turned `stuck`), `\"reboot_failed\"` (its agent reported " +
			"a failed pre-reboot hook or reboot command, or it never went down: the history outcome `failed`), " +
			"`\"unhealthy\"` (its slot was freed at the `healthy` deadline with its workloads still unhealthy, " +
			"`on_deadline = \"release\"`) and `\"drain_aborted\"` (its drain did not finish within its deadline, " +
			"`on_timeout = \"abort\"`; a drain canceled by someone else does not count). Each cycle counts once " +
			"per kind. At least one, none twice."},
}}

var rolloutTable = &table{typ: "rollout", of: reflect.TypeFor[RolloutConfig](), settings: []setting{
	{name: "max_out", field: "MaxOut", check: value(atLeast(0, "")),
		doc: "At most this many hosts out of service for rollboot at once (draining, drained, rebooting, " +
			"rejoining or stuck), all groups together, on top of each group's `concurrency` and " +
			"`max_unavailable`: the hosts next in line, first come first served across groups, wait with the " +
			"reason `rollout max_out: N of M hosts out` (`rollboot_hosts_waiting{reason=\"rollout_budget\"}`). " +
			"`plan`'s estimates follow it. `0` (the default): no cap. At least 0."},
	{name: "max_drains_per_hour", field: "MaxDrainsPerHour", check: value(atLeast(0, "")),
		doc: "At most this many drains started in any rolling hour, all groups together (a retried drain " +
			"counts again): the next host waits with the reason `rollout max_drains_per_hour: ...; the next may " +
			"start at T` until the oldest of the hour's drains is an hour old. Counted from the drain starts each " +
			"host's plan keeps, so a new leader counts the same. `plan`'s estimates follow it. `0` (the " +
			"default): no cap. At least 0."},
}}

// defaultFailureBudget is a group's failure_budget before the file sets any
// of it: the table's defaults (no budget), nothing inherited.
func defaultFailureBudget(*Config) any {
	var fc FailureBudgetConfig
	failureBudgetTable.fill(reflect.ValueOf(&fc).Elem(), nil)
	return fc
}

// failureKinds checks a failure budget's count list.
func failureKinds(ks []string) error {
	if len(ks) == 0 {
		return fmt.Errorf("must name at least one kind of failure: %q", failureKindNames)
	}
	var errs []error
	seen := map[string]bool{}
	for i, k := range ks {
		if _, err := policy.ParseFailureKind(k); err != nil {
			errs = append(errs, elem(i, err))
		} else if seen[k] {
			errs = append(errs, elem(i, fmt.Errorf("%q is listed twice", k)))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}

// budget compiles a failure_budget block, checked.
func (fc FailureBudgetConfig) budget() policy.FailureBudget {
	b := policy.FailureBudget{MaxFailures: fc.MaxFailures, Window: fc.Window}
	for _, k := range fc.Count {
		kind, _ := policy.ParseFailureKind(k)
		b.Count = append(b.Count, kind)
	}
	return b
}

// failureBudgets compiles the failure_budget blocks: the top-level one (the
// rollout) and each group's.
func (c *Config) failureBudgets() policy.FailureBudgets {
	bs := policy.FailureBudgets{Rollout: c.FailureBudget.budget()}
	for _, g := range c.Groups {
		if b := g.FailureBudget.budget(); b.On() {
			if bs.Groups == nil {
				bs.Groups = map[string]policy.FailureBudget{}
			}
			bs.Groups[g.Name] = b
		}
	}
	return bs
}

// rolloutBudget compiles the rollout block.
func (rc RolloutConfig) rolloutBudget() policy.RolloutBudget {
	return policy.RolloutBudget{MaxOut: rc.MaxOut, MaxDrainsPerHour: rc.MaxDrainsPerHour}
}

package config

import (
	"slices"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/policy"
)

// Compiled is a configuration that Compile checked, with what the agent, the
// coordinator and the FleetLock server decide with already parsed into typed
// values. They take it as is and check nothing again.
//
// Its settings are a copy of the Config compiled: changing the Config
// afterwards changes nothing here. Changing the settings of a Compiled (the
// demo and the tests point each agent at its own host) skips the checks.
type Compiled struct {
	Config
	// Policy holds the groups in match order, each with its compiled filter,
	// its budget and its schedule (the windows it names, or every window, or
	// always open when there is none), and the default group for the nodes
	// that none of them matches.
	Policy policy.Policy
	// ForceDrains: drain.on_timeout = "force" (Nomad's deadline stops what is
	// left) rather than "abort".
	ForceDrains bool
	// HoldOnDeniedHandOver: coordinator.leader_transfer_denied = "hold".
	HoldOnDeniedHandOver bool
	// NotifyMessages are the notify block's message templates, compiled over
	// the defaults.
	NotifyMessages notify.Messages
	// AlertGate is the alerts block, checked, its filter compiled.
	AlertGate alertgate.Rules
	// HealthGates are the gate blocks, checked, in the file's order.
	HealthGates []healthgate.Gate
	// FailureBudgets are the failure_budget blocks (the rollout's, each
	// group's); RolloutBudget the rollout block.
	FailureBudgets policy.FailureBudgets
	RolloutBudget  policy.RolloutBudget
}

// Compile checks the configuration and compiles it: it reports every problem
// at once as Errors, each with the file:line:col where the offending value was
// written (or the environment variable it came from), together with the
// problems Parse found with values, and then returns no Compiled.
//
// It is the one place where the configuration is checked: call it once, after
// the file, the environment and the flags are merged.
func Compile(c *Config) (*Compiled, error) {
	v := &validator{c: c}
	v.sections()
	v.windows()
	v.freezes()
	v.groups()
	v.groupsAfter()
	v.silences()
	v.gates()
	v.approvals()
	v.cordons()
	errs := append(append(Errors(nil), c.problems...), v.errs...)
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	cc := &Compiled{
		Config:               *c,
		Policy:               c.policy(),
		ForceDrains:          c.Drain.OnTimeout == OnTimeoutForce,
		HoldOnDeniedHandOver: c.Coordinator.LeaderTransferDenied == "hold",
		NotifyMessages:       c.Notify.messages(),
		AlertGate:            c.Alerts.alertRules(),
		HealthGates:          c.healthGates(),
		FailureBudgets:       c.failureBudgets(),
		RolloutBudget:        c.Rollout.rolloutBudget(),
	}
	cc.problems, cc.bad = nil, nil
	return cc, nil
}

// policy compiles the windows and groups, checked. The default group has a
// concurrency of 1, no max_unavailable and the default schedule.
//
// A group that lists no windows gets the default schedule: every window
// defined, or always open if there is none.
func (c *Config) policy() policy.Policy {
	byName := map[string]policy.Window{}
	var all policy.Schedule
	for _, wc := range c.Windows {
		w := wc.compile()
		if _, dup := byName[wc.Name]; !dup {
			byName[wc.Name] = w
		}
		all = append(all, w)
	}
	groups := make([]policy.Group, 0, len(c.Groups))
	for _, gc := range c.Groups {
		g := gc.compile(byName, all)
		g.Freezes = c.compileFreezes(gc.Name)
		groups = append(groups, g)
	}
	return policy.Policy{
		Groups: groups,
		Default: policy.Group{Name: policy.DefaultGroupName, Concurrency: 1, Schedule: all,
			Freezes: c.compileFreezes(policy.DefaultGroupName)},
	}
}

// compile compiles a window, checked.
func (wc WindowConfig) compile() policy.Window {
	w := policy.Window{Name: wc.Name}
	for _, d := range wc.Days {
		day, _ := policy.ParseWeekday(d)
		w.Days = append(w.Days, day)
	}
	w.Start, _ = policy.ParseClock(wc.Start)
	w.End, _ = policy.ParseClock(wc.End)
	w.Location, _ = policy.ParseTimeZone(wc.TimeZone)
	for _, r := range wc.Monthly {
		md, _ := policy.ParseMonthDay(r)
		w.Monthly = append(w.Monthly, md)
	}
	w.OffsetDays = wc.OffsetDays
	return w
}

// compile compiles a group, checked: windows are the windows by name, all the
// default schedule.
func (gc GroupConfig) compile(windows map[string]policy.Window, all policy.Schedule) policy.Group {
	g := policy.Group{Name: gc.Name, Concurrency: gc.Concurrency, Schedule: all, Settle: gc.Settle,
		HostsWithoutNode: slices.Clone(gc.HostsWithoutNode)}
	if gc.Filter != "" {
		g.Filter, _ = policy.CompileFilter(gc.Filter)
	}
	g.MaxUnavailablePct, _ = policy.ParsePercent(gc.MaxUnavailable)
	if len(gc.Windows) > 0 {
		g.Schedule = nil
		for _, name := range gc.Windows {
			g.Schedule = append(g.Schedule, windows[name])
		}
	}
	return g
}

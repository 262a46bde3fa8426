package config

import (
	"github.com/rollboot/rollboot/internal/alertgate"
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
	v.nomad()
	v.state()
	v.agent()
	v.coordinator()
	v.drain()
	v.healthy()
	v.fleetlock()
	v.telemetry()
	messages := v.notify()
	v.workloads()
	v.capacity()
	p := v.policy()
	alerts := v.alerts()
	errs := append(append(Errors(nil), c.problems...), v.errs...)
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	cc := &Compiled{
		Config:               *c,
		Policy:               p,
		ForceDrains:          c.Drain.OnTimeout == OnTimeoutForce,
		HoldOnDeniedHandOver: c.Coordinator.LeaderTransferDenied == "hold",
		NotifyMessages:       messages,
		AlertGate:            alerts,
	}
	cc.problems, cc.bad = nil, nil
	return cc, nil
}

// policy checks the windows and groups and compiles them. The default group
// has a concurrency of 1, no max_unavailable and the default schedule.
//
// A group that lists no windows gets the default schedule: every window
// defined, or always open if there is none.
func (v *validator) policy() policy.Policy {
	windows, all := v.windows()
	return policy.Policy{
		Groups:  v.groups(windows, all),
		Default: policy.Group{Name: policy.DefaultGroupName, Concurrency: 1, Schedule: all},
	}
}

// Package rules is the rollout rules a coordinator decides with (what a
// stored policy compiles to) and what each part of a pass derives from them.
package rules

import (
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/nodegroups"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/sideoutput"
	"github.com/rollboot/rollboot/internal/silence"
	"github.com/rollboot/rollboot/internal/wave"
	"github.com/rollboot/rollboot/internal/workload"
)

// Rules are the options that come from the stored policy.
type Rules struct {
	// Version is the stored policy's version; 0: none is stored, these are the
	// safe default rules.
	Version int
	// Groups are in match order; nodes no group matches fall in DefaultGroup
	// (concurrency 1 by default: SetDefaults).
	Groups       []GroupSpec
	DefaultGroup policy.Group
	Timing       phase.Timing
	HistorySize  int
	// ServerStableFor is how long a server must have been stable (autopilot's
	// StableSince) after its reboot before its host's slot is freed.
	ServerStableFor time.Duration
	// HoldOnDeniedHandOver: when a leadership hand-over is refused for lack of
	// permission, keep the host waiting instead of rebooting the leader.
	HoldOnDeniedHandOver bool
	// Alerts: no new drain starts while alerts fire; off without a URL.
	Alerts alertgate.Rules
	// HealthGates: no drain of a group starts while a gate guarding it is
	// closed.
	HealthGates []healthgate.Gate
	// Workloads are the workload blockers' settings.
	Workloads workload.Settings
	// Capacity configures the capacity gate.
	Capacity CapacityGate
	// DefaultOptions are the default group's drain options and healthy
	// settings (zero: DefaultGroupOptions).
	DefaultOptions GroupOptions
	// MetaKeys is what the node metadata publisher writes beside rollboot's
	// own keys.
	MetaKeys sideoutput.MetaRules
	// Approval: the groups whose hosts await an approval, and ApprovalHook
	// the webhook asked for those with approval = "webhook".
	Approval     admission.ApprovalRules
	ApprovalHook approvalhook.Settings
	// FailureBudgets halt a group, or the rollout, after too many failed
	// cycles (package haltkeep); RolloutBudget caps the hosts out and the drains
	// started per hour of all groups together (admission).
	FailureBudgets policy.FailureBudgets
	RolloutBudget  policy.RolloutBudget
}

// GroupSpec is a configured group: its budget and schedule, and the Nomad filter
// expression that selects its nodes (evaluated by Nomad, on the full node).
type GroupSpec struct {
	policy.Group
	Filter string // "" matches every node
	// Options are the group's drain options and healthy settings.
	Options GroupOptions
}

// GroupOptions are a group's drain options and healthy settings.
type GroupOptions struct {
	Drain   phase.DrainOptions
	Healthy rejoin.Settings
	// MaxUptime: a host of the group up longer (its jitter added) needs a
	// reboot; 0: no limit.
	MaxUptime time.Duration
	// HoldSingletons: the group's singletons = "hold".
	HoldSingletons bool
	// Silence: the Alertmanager silences of its hosts.
	Silence silence.Rules
	// Wave: its canaries and the groups it follows.
	Wave wave.GroupRules
}

// DefaultGroupOptions are the options of a group that sets none: the safe
// defaults of package config.
var DefaultGroupOptions = GroupOptions{
	Drain:   phase.DrainOptions{},
	Healthy: rejoin.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoin.OnDeadlineHold},
}

// CapacityGate configures the capacity gate (the policy's capacity block).
type CapacityGate struct {
	Enabled bool
	// Headroom is the share of each node's capacity kept free, in [0, 1).
	Headroom float64
}

// SetDefaults gives r a default group when it names none: the group
// "default", one host at a time.
func (r *Rules) SetDefaults() {
	if r.DefaultGroup.Name == "" {
		r.DefaultGroup = policy.Group{Name: policy.DefaultGroupName, Concurrency: 1}
	}
}

// AllGroups returns the policy's groups: the default group, then the
// configured ones in match order.
func (r *Rules) AllGroups() []policy.Group {
	gs := make([]policy.Group, 0, len(r.Groups)+1)
	gs = append(gs, r.DefaultGroup)
	for _, g := range r.Groups {
		gs = append(gs, g.Group)
	}
	return gs
}

// Known reports whether name is a configured group or the default one.
func (r *Rules) Known(name string) bool {
	if name == r.DefaultGroup.Name {
		return true
	}
	for _, g := range r.Groups {
		if g.Name == name {
			return true
		}
	}
	return false
}

// NodeGroups are the configured groups, in match order, as package
// nodegroups asks Nomad about them.
func (r *Rules) NodeGroups() []nodegroups.Group {
	out := make([]nodegroups.Group, len(r.Groups))
	for i, g := range r.Groups {
		out[i] = nodegroups.Group{Name: g.Name, Filter: g.Filter}
	}
	return out
}

// Options are the options of the group named name (the default group's for
// an unknown name). Healthy settings left zero (options built without them)
// are the defaults: a zero deadline would make every host stuck at once.
func (r *Rules) Options(name string) GroupOptions {
	o := r.DefaultOptions
	for _, g := range r.Groups {
		if g.Name == name {
			o = g.Options
			break
		}
	}
	if o.Healthy.Deadline <= 0 || o.Healthy.OnDeadline == "" {
		o.Healthy = DefaultGroupOptions.Healthy
	}
	return o
}

// DrainDeadlines are the drain deadlines the groups set for themselves (the
// default group's too): a window must leave room for the group's own drain.
func (r *Rules) DrainDeadlines() map[string]time.Duration {
	out := map[string]time.Duration{}
	if d := r.DefaultOptions.Drain.Deadline; d > 0 {
		out[r.DefaultGroup.Name] = d
	}
	for _, g := range r.Groups {
		if g.Options.Drain.Deadline > 0 {
			out[g.Name] = g.Options.Drain.Deadline
		}
	}
	return out
}

// HoldsSingletons reports whether some group holds its singletons
// (singletons = "hold"): the workload blockers then read for it.
func (r *Rules) HoldsSingletons() bool {
	if r.DefaultOptions.HoldSingletons {
		return true
	}
	for _, g := range r.Groups {
		if g.Options.HoldSingletons {
			return true
		}
	}
	return false
}

// Waves are the groups' wave settings, of the groups that have any.
func (r *Rules) Waves() wave.Rules {
	out := wave.Rules{}
	for _, g := range r.Groups {
		if w := g.Options.Wave; w.Canaries > 0 || len(w.After) > 0 {
			out[g.Name] = w
		}
	}
	return out
}

// Silences are the groups' silence rules and the Alertmanager they are
// written to.
func (r *Rules) Silences() sideoutput.SilenceRules {
	out := sideoutput.SilenceRules{ByGroup: map[string]silence.Rules{}, Default: r.DefaultOptions.Silence,
		AlertmanagerURL: r.Alerts.AlertmanagerURL, Timeout: r.Alerts.Timeout}
	for _, g := range r.Groups {
		out.ByGroup[g.Name] = g.Options.Silence
	}
	return out
}

// Admission is admission's configuration under r: gates says whether the
// server quorum gates can be read, workloads whether the workload blockers
// can, and hold why every new start is held (zero: none is).
func (r *Rules) Admission(gates, workloads bool, hold phase.WaitReason) admission.Rules {
	return admission.Rules{Groups: r.AllGroups(), DrainDeadline: r.Timing.DrainDeadline,
		GroupDeadlines: r.DrainDeadlines(), Gates: gates, Hold: hold,
		Alerts: r.Alerts.Enabled(), Workloads: workloads && (r.Workloads.Enabled() || r.HoldsSingletons()),
		Capacity: r.Capacity.Enabled, HealthGates: r.HealthGates, Approval: r.Approval,
		CordonNext: r.MetaKeys.CordonNext, Rollout: r.RolloutBudget}
}

package config

import (
	"reflect"
	"time"
)

// What to do when a rebooted host's workloads are not healthy by
// healthy.deadline (package rejoin decides with these values).
const (
	OnDeadlineHold    = "hold"
	OnDeadlineRelease = "release"
)

// HealthyConfig is a healthy block: when a rebooted client host counts as back
// and its slot is freed.
type HealthyConfig struct {
	// Deadline is how long after the host came back its allocations (and
	// checks) may take to be healthy.
	Deadline time.Duration
	// OnDeadline is OnDeadlineHold (the host is stuck, its slot stays taken) or
	// OnDeadlineRelease (the slot is freed, with an alert).
	OnDeadline string
	// ConsulChecks: the node's Consul checks must pass too.
	ConsulChecks bool
}

// healthyTable is the healthy block, at the top level and in a group (whose
// values are the top-level one's unless it sets them).
var healthyTable = &table{typ: "healthy", of: reflect.TypeFor[HealthyConfig](), settings: []setting{
	{name: "deadline", field: "Deadline", def: 10 * time.Minute, check: value(positive),
		doc: "How long after the host came back (it entered `rejoining`) its workloads may take to be " +
			"healthy. > 0."},
	{name: "on_deadline", field: "OnDeadline", def: OnDeadlineHold, check: value(oneOf("value", OnDeadlineHold, OnDeadlineRelease)),
		doc: "Past the deadline: `\"hold\"` marks the host `stuck` with the reason (`workloads not healthy " +
			"within 10m0s of the reboot: web.web[0] unhealthy`): its slot stays taken and the rollout of " +
			"its group waits until its workloads turn healthy or an operator frees the slot with `rollboot " +
			"release HOST`; the `stuck` notification is sent. `\"release\"` frees the slot all the same and " +
			"alerts: an error in the coordinator's log (`slot freed with unhealthy workloads`, with what " +
			"was unhealthy) and `rollboot_unhealthy_released_total{group}`, on which the example rule " +
			"`RollbootReleasedUnhealthy` alerts ([metrics](metrics.md#alert-rules)); the cycle's " +
			"`back_in_service` notification and its `rollboot history` entry (under Errors, outcome " +
			"`rebooted`) say what was unhealthy."},
	{name: "consul_checks", field: "ConsulChecks",
		doc: "The node's Consul checks must pass too. Without a Consul client configured the host holds with " +
			"that as its reason."},
}}

// GroupDrainConfig is a group's drain block.
type GroupDrainConfig struct {
	// Deadline is the group's drain deadline (drain.deadline by default).
	Deadline time.Duration
	// IgnoreSystemJobs: the drain leaves system jobs running (the default).
	IgnoreSystemJobs bool
	// StopJobs are the jobs whose allocations are stopped when the drain
	// starts rather than migrated by it: "job" (any namespace) or
	// "namespace/job".
	StopJobs []string
}

// groupDrain is a group's drain block before the group sets any of it: the
// top-level one's values, decoded before the groups.
func (c *Config) groupDrain() GroupDrainConfig {
	return GroupDrainConfig{Deadline: c.Drain.Deadline, IgnoreSystemJobs: c.Drain.IgnoreSystemJobs, StopJobs: c.Drain.StopJobs}
}

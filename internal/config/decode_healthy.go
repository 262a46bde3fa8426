package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
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

// groupBlockSchema are the blocks of a group block.
var groupBlockSchema = []hcl.BlockHeaderSchema{{Type: "drain"}, {Type: "healthy"}}

// groupDefaults are a group's drain and healthy settings before its own blocks:
// the top-level ones, decoded before the groups.
func (c *Config) groupDefaults() (GroupDrainConfig, HealthyConfig) {
	return GroupDrainConfig{Deadline: c.Drain.Deadline, IgnoreSystemJobs: c.Drain.IgnoreSystemJobs,
		StopJobs: c.Drain.StopJobs}, c.Healthy
}

// groupBlocks decodes the drain and healthy blocks of group s over g's
// defaults.
func (d *decoder) groupBlocks(blocks hcl.Blocks, s scope, g *GroupConfig) {
	if b := d.single(blocks, "drain"); b != nil {
		ds := s.sub("drain")
		content := d.content(b.Body, &hcl.BodySchema{Attributes: attrSchema("deadline", "ignore_system_jobs", "stop_jobs")})
		if content != nil {
			a := content.Attributes
			d.duration(a, ds, "deadline", &g.Drain.Deadline)
			d.boolean(a, ds, "ignore_system_jobs", &g.Drain.IgnoreSystemJobs)
			d.strList(a, ds, "stop_jobs", &g.Drain.StopJobs)
		}
	}
	if b := d.single(blocks, "healthy"); b != nil {
		d.healthy(b.Body, s.sub("healthy"), &g.Healthy)
	}
}

// healthy decodes a healthy block (top level or a group's) over h.
func (d *decoder) healthy(body hcl.Body, s scope, h *HealthyConfig) {
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema("deadline", "on_deadline", "consul_checks")})
	if content == nil {
		return
	}
	a := content.Attributes
	d.duration(a, s, "deadline", &h.Deadline)
	d.str(a, s, "on_deadline", &h.OnDeadline)
	d.boolean(a, s, "consul_checks", &h.ConsulChecks)
}

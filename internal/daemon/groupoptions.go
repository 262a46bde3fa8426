package daemon

import (
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/gateread"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/workload"
)

// withGroupOptions gives each of the coordinator's groups its drain options and
// healthy settings: cfg.Groups and the compiled groups are in the same order.
func withGroupOptions(specs []rules.GroupSpec, cfg *config.Compiled) []rules.GroupSpec {
	for i := range specs {
		if i < len(cfg.Groups) && cfg.Groups[i].Name == specs[i].Name {
			g := cfg.Groups[i]
			specs[i].Options = groupOptions(g.Drain, g.Healthy)
			specs[i].Options.MaxUptime = g.MaxUptime
			specs[i].Options.HoldSingletons = g.Singletons == workload.SingletonsHold
			specs[i].Options.Silence = g.Silence.Rules()
			specs[i].Options.Wave = g.WaveRules()
		}
	}
	return specs
}

// defaultGroupOptions are the default group's: the top-level drain, healthy
// and silence blocks.
func defaultGroupOptions(cfg *config.Compiled) rules.GroupOptions {
	o := groupOptions(config.GroupDrainConfig{Deadline: cfg.Drain.Deadline, IgnoreSystemJobs: cfg.Drain.IgnoreSystemJobs,
		StopJobs: cfg.Drain.StopJobs}, cfg.Healthy)
	o.Silence = cfg.Silence.Rules()
	return o
}

func groupOptions(d config.GroupDrainConfig, h config.HealthyConfig) rules.GroupOptions {
	return rules.GroupOptions{
		Drain:   phase.DrainOptions{Deadline: d.Deadline, DrainSystemJobs: !d.IgnoreSystemJobs, StopJobs: d.StopJobs},
		Healthy: rejoin.Settings{Deadline: h.Deadline, OnDeadline: h.OnDeadline, ConsulChecks: h.ConsulChecks},
	}
}

// consulHealth is the Consul health API of the coordinator's cluster clients,
// for healthy.consul_checks (nil without a Consul client).
func consulHealth(clusters coordinator.ClusterAccess) coordinator.ConsulHealthAPI {
	if cl, ok := clusters.(*Clusters); ok && cl.Consul != nil {
		return cl.Consul.Health()
	}
	return nil
}

// gateReader reads the health gates: over HTTP, Nomad's jobs through c, and
// Consul's services through the coordinator's Consul client (none without
// one: consul_service gates then stay closed, saying so).
func gateReader(c *api.Client, clusters coordinator.ClusterAccess) *gateread.Reader {
	r := &gateread.Reader{Nomad: c.Jobs()}
	if cl, ok := clusters.(*Clusters); ok && cl.Consul != nil {
		r.Consul = cl.Consul.Health()
	}
	return r
}

package coordinator

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/rejoinwatch"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// Healthy after the reboot, and the drain options of a group.
//
// Before a rebooted client host's slot is freed, the allocations on its node
// must be running and healthy and, with healthy.consul_checks, the node's Consul
// checks must pass (package rejoin decides). The observer reads them only for
// the hosts that wait for it (rejoining, or stuck after they came back); the
// node's allocations are watched meanwhile (package rejoinwatch: the pass
// takes them from the watch), and its Consul checks, so a
// change wakes a pass. Past healthy.deadline the host is stuck (on_deadline =
// "hold") or its slot is freed with an alert ("release").
//
// A group's drain block gives the drain deadline, whether the drain leaves the
// system jobs running, and the jobs whose allocations are stopped (Nomad's alloc
// stop, package stopjobs) when the drain starts rather than migrated by it.

// ConsulHealthAPI reads a node's Consul checks (healthy.consul_checks);
// *consulapi.Health implements it.
type ConsulHealthAPI interface {
	Node(node string, q *consulapi.QueryOptions) (consulapi.HealthChecks, *consulapi.QueryMeta, error)
}

// planGroup is the group whose options apply to a host: its plan's, recorded
// at grant, while its cycle runs; its node's otherwise.
func planGroup(p store.Plan, group string) string {
	if planUnderWay(p) && p.Group != "" {
		return p.Group
	}
	return group
}

// withGroupOptions puts the options of the host's group into its input.
func (c *Coordinator) withGroupOptions(s *snapshot, name string, in *phase.Input) {
	o := c.opt.Rules.Options(planGroup(in.Plan, in.Group))
	in.Drain, in.Healthy, in.MaxUptime = o.Drain, o.Healthy, o.MaxUptime
	if o.Drain.Deadline > 0 {
		in.Timing.DrainDeadline = o.Drain.Deadline
	}
	in.Health = s.health[name]
}

// readRejoinHealth reads, for each host that waits for its workloads to be
// healthy, its node's allocations and (with consul_checks) its Consul checks.
// A read that fails is kept as the reason the host holds.
func (c *Coordinator) readRejoinHealth(ctx context.Context, s *snapshot) {
	var names []string
	for _, name := range busyNames(s) { // waitsForHealth: rejoining or stuck
		hv, p := s.hosts[name], s.plans[name]
		if hv.node != nil && phase.WaitsForHealth(p) && hv.node.Status == "ready" && (!p.EligibleBefore || hv.node.Eligible) &&
			!phase.AwaitsReport(hv.rec, p, true) { // read once the agent reported (stepRejoining)
			names = append(names, name)
		}
	}
	seen, checked := make([]*rejoin.Observed, len(names)), make([]string, len(names))
	parallel.Each(len(names), NodeReadParallelism, nil, func(i int) { // side by side: a round trip each
		hv, o := s.hosts[names[i]], &rejoin.Observed{}
		o.Allocs, o.AllocsErr = c.nodeAllocs(ctx, hv.node.ID)
		seen[i], checked[i] = o, c.readChecks(ctx, s, o, planGroup(s.plans[names[i]], hv.group), hv.node.ID)
	})
	c.checkNodes = map[string]bool{}
	for i, name := range names {
		if s.health == nil {
			s.health = map[string]*rejoin.Observed{}
		}
		s.health[name] = seen[i]
		if checked[i] != "" {
			c.checkNodes[checked[i]] = true
		}
	}
}

// readChecks reads the Consul checks of node nodeID into o when group waits
// for them (healthy.consul_checks), and returns the node's name: "" when its
// checks are not read, or its name is unknown (o then holds that error).
func (c *Coordinator) readChecks(ctx context.Context, s *snapshot, o *rejoin.Observed, group, nodeID string) (nodeName string) {
	if !c.opt.Rules.Options(group).Healthy.ConsulChecks {
		return ""
	}
	if n := s.nodes[nodeID]; n != nil {
		nodeName = n.Name
	}
	o.Checks, o.ChecksErr = rejoinwatch.ReadChecks(ctx, c.opt.ConsulHealth, nodeName)
	return nodeName
}

// nodeAllocs returns the allocations on the node, as package rejoin sees them:
// as the node's watch last read them (a change pokes a pass after the watch kept
// it), else as this pass read them (allocs.OnNode: the first pass of a host
// waiting for them, before its watch starts).
func (c *Coordinator) nodeAllocs(ctx context.Context, nodeID string) ([]rejoin.Alloc, error) {
	allocs, err := c.allocs.OnNode(ctx, nodeID)
	if err != nil {
		return nil, fmt.Errorf("cannot read the %w", err)
	}
	return rejoin.NomadAllocs(allocs), nil
}

// alertUnhealthy reports a host whose slot was freed past its healthy deadline
// with its workloads still unhealthy (on_deadline = "release").
func (c *Coordinator) alertUnhealthy(in phase.Input, d phase.Decision, log *slog.Logger) {
	if d.Unhealthy == "" || d.History == nil {
		return // not freed in this decision: still waiting for something else
	}
	log.Error("slot freed with unhealthy workloads: the healthy deadline passed (healthy.on_deadline = \"release\")",
		"deadline", in.Healthy.Deadline, "unhealthy", d.Unhealthy)
	c.metrics.UnhealthyReleased.WithLabelValues(d.Plan.Group).Inc()
}

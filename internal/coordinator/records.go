package coordinator

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/store"
)

// What hosts publish is checked before the coordinator uses it, and which
// hosts lost their agent is told (package recordcheck, with the pure checks
// of package hostcheck, shared with `rollboot status`).

// agentJob returns the agent job's name ("" when not watched).
func (c *Coordinator) agentJob() string {
	if c.opt.Jobs == nil {
		return ""
	}
	if c.opt.AgentJob == "" {
		return hostcheck.DefaultAgentJob
	}
	return c.opt.AgentJob
}

func (c *Coordinator) watchAgentJob(ctx context.Context, idx uint64) (uint64, error) {
	allocs, n, err := hostcheck.ReadAgentAllocs(ctx, c.opt.Jobs, c.agentJob(), c.opt.AgentJobNamespace, idx, 5*time.Minute)
	c.mail.update(func(a *answers) {
		if err != nil {
			a.agentJob.Failed() // not known to be current: passes read them
			return
		}
		a.agentJob.Answered(n, allocs, n != idx)
	})
	return n, err
}

// checkRecords drops the records the coordinator must not use and finds the
// missing agents (package recordcheck); it logs both when they change.
func (c *Coordinator) checkRecords(ctx context.Context, hosts []store.HostRecord, bad []store.BadRecord,
	nodes map[string]*api.NodeListStub, ctl store.Control) ([]store.HostRecord, map[string]string) {
	out := c.records.Check(ctx, hosts, bad, nodes, ctl, c.backing(), c.seen.agentJob)
	c.mu.Lock()
	c.ignored = out.Ignored
	c.mu.Unlock()
	return out.Records, out.Missing
}

// Ignored returns the host records the last reconcile did not use, and why.
func (c *Coordinator) Ignored() []store.BadRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ignored)
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// backing is what the operator backs the hosts with, and the hosts under
// way (the clusters' memberships are package recordcheck's to read).
func (c *Coordinator) backing() hostcheck.Backing {
	b := hostcheck.Backing{Nodeless: map[string]string{}, FleetLockIDs: map[string]bool{}, UnderWay: map[string]bool{}}
	c.mu.Lock()
	for name, p := range c.plans {
		if planUnderWay(p) {
			b.UnderWay[name] = true
		}
	}
	c.mu.Unlock()
	for _, g := range c.opt.Groups {
		for _, h := range g.HostsWithoutNode {
			b.Nodeless[h] = g.Name
		}
	}
	for _, id := range c.opt.FleetLockIDs {
		b.FleetLockIDs[id] = true
	}
	return b
}

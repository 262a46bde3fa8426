package coordinator

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/store"
)

// This file checks what hosts publish before the coordinator uses it, and tells
// which hosts lost their agent. Both are pure functions of what was read, shared
// with `rollboot status`.

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

// readAgentAllocs returns the agent job's allocations: as the watch last saw
// them (as the pass took them), or read now when it is not live or its answer
// is older than what a pass read itself (as for the host records:
// caches.go).
func (c *Coordinator) readAgentAllocs(ctx context.Context, job string) (hostcheck.AgentAllocs, error) {
	if w := c.seen.agentJob; w.Live && w.Index >= c.agentJobAtLeast {
		return w.Val, nil
	}
	allocs, index, err := hostcheck.ReadAgentAllocs(ctx, c.opt.Jobs, job, c.opt.AgentJobNamespace, 0, 0)
	if err == nil {
		c.agentJobAtLeast = max(c.agentJobAtLeast, index)
	}
	return allocs, err
}

// checkRecords drops the records the coordinator must not use and finds the
// missing agents; it logs both when they change.
func (c *Coordinator) checkRecords(ctx context.Context, hosts []store.HostRecord, bad []store.BadRecord,
	nodes map[string]*api.NodeListStub, ctl store.Control) ([]store.HostRecord, map[string]string) {
	hosts, ignored := hostcheck.ValidateRecords(hosts, nodes)
	hosts = c.corroborate(ctx, hosts, nodes)
	bad = append(bad, ignored...)
	missing := map[string]string{}
	var lines []string
	var allocErr error
	if job := c.agentJob(); job != "" {
		allocs, err := c.readAgentAllocs(ctx, job)
		if err != nil {
			// A failed read only hides missing agents (logged when it changes).
			allocErr = err
			lines = append(lines, "allocs:"+err.Error())
		} else {
			missing = hostcheck.MissingAgents(hosts, nodes, allocs, c.now())
		}
	}
	for _, b := range bad {
		lines = append(lines, "bad:"+b.Host+":"+b.Err)
	}
	for _, p := range ctl.Problems {
		lines = append(lines, "control:"+p)
	}
	for h, why := range missing {
		lines = append(lines, "missing:"+h+":"+why)
	}
	sort.Strings(lines)
	key := strings.Join(lines, "\n")
	changed := key != c.reported
	c.reported = key
	c.mu.Lock()
	c.ignored = bad
	c.mu.Unlock()
	if changed {
		if allocErr != nil {
			c.log.Warn("cannot tell which agents run", "err", allocErr)
		}
		for _, b := range bad {
			c.log.Warn("host record ignored", "host", b.Host, "path", b.Path, "err", b.Err)
		}
		for _, p := range ctl.Problems {
			c.log.Warn("control entry skipped", "err", p)
		}
		for _, h := range sortedKeys(missing) {
			c.log.Warn("agent missing", "host", h, "why", missing[h])
		}
	}
	return hosts, missing
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

// corroborate corrects the records with the clusters and the operator's lists
// (Corroborate). The hosts left out are counted, and each logged once; the
// disputes are logged when they change.
func (c *Coordinator) corroborate(ctx context.Context, recs []store.HostRecord, nodes map[string]*api.NodeListStub) []store.HostRecord {
	members, unread := c.members.Read(ctx, recs)
	out := hostcheck.Corroborate(recs, nodes, c.backing(members, unread))
	c.metrics.State.Unbacked(len(out.Unbacked))
	c.corroborated.Unbacked(out.Unbacked)
	c.corroborated.Disputes(out.Disputes)
	return out.Records
}

// backing is what the operator and the clusters back the hosts with.
func (c *Coordinator) backing(members map[string]health.ClusterHealth, unread map[string]string) hostcheck.Backing {
	b := hostcheck.Backing{Members: members, Unread: unread, Nodeless: map[string]string{}, FleetLockIDs: map[string]bool{},
		UnderWay: map[string]bool{}}
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

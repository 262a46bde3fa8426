package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/phase"
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
			a.agentJob.failed() // not known to be current: passes read them
			return
		}
		a.agentJob.answered(n, allocs, n != idx)
	})
	return n, err
}

// readAgentAllocs returns the agent job's allocations: as the watch last saw
// them (as the pass took them), or read now when it is not live or its answer
// is older than what a pass read itself (as for the host records:
// caches.go).
func (c *Coordinator) readAgentAllocs(ctx context.Context, job string) (hostcheck.AgentAllocs, error) {
	if w := c.seen.agentJob; w.live && w.index >= c.agentJobAtLeast {
		return w.val, nil
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

// The server clusters' memberships, read for Corroborate (corroborate.go).

// ClusterLister is implemented by a ClusterAccess that knows, on its own, which
// server clusters it reaches (the coordinator's Nomad region, and the Consul
// and Vault clusters it was given addresses of). Their memberships are read
// whatever the records claim, so that a server whose record leaves its
// servers out is still known as one.
type ClusterLister interface {
	KnownClusters(ctx context.Context) []store.Server
}

// MembershipMaxAge is how old the memberships a pass corroborates the records
// with may be (and at most the resync interval). A server joining or leaving a
// cluster is rare; the quorum gates of a host being taken out read their
// clusters again in the pass that decides.
const MembershipMaxAge = 10 * time.Second

// membership is the last read of the memberships, and what Corroborate made
// of the records with it.
type membership struct {
	at   time.Time
	keys string // the clusters wanted at the last read
	// good: each cluster's last membership read that succeeded (a server
	// joining or leaving is rare: a failed read falls back on it); unread:
	// the clusters never read, with why; fresh: the clusters read now, by
	// the current pass (readClusters uses their health as the gates').
	good   map[string]health.ClusterHealth
	unread map[string]string
	fresh  map[string]bool
	// logged: the unbacked hosts already logged.
	logged map[string]bool
	// disputes: the last dispute logged for each host.
	disputes map[string]string
}

// clustersToRead returns the clusters whose membership a pass reads: the known
// ones and every one a record claims, by key.
func (c *Coordinator) clustersToRead(ctx context.Context, recs []store.HostRecord) map[string]store.Server {
	out := map[string]store.Server{}
	if l, ok := c.opt.Clusters.(ClusterLister); ok {
		for _, srv := range l.KnownClusters(ctx) {
			out[phase.ClusterKey(srv)] = store.Server{Product: srv.Product, Cluster: srv.Cluster}
		}
	}
	for i := range recs {
		for _, srv := range recs[i].Servers {
			out[phase.ClusterKey(srv)] = store.Server{Product: srv.Product, Cluster: srv.Cluster}
		}
	}
	return out
}

// readMembers returns the memberships of the clusters (the last good read of
// each) and those never read, reading them again unless the last read, of the
// same clusters, is younger than MembershipMaxAge (or the resync interval).
// Called by the pass's goroutine only.
func (c *Coordinator) readMembers(ctx context.Context, recs []store.HostRecord) (map[string]health.ClusterHealth, map[string]string) {
	m := &c.membership
	want := c.clustersToRead(ctx, recs)
	keys := strings.Join(sortedKeys(want), "\n")
	m.fresh = nil
	if m.good != nil && keys == m.keys && c.now().Sub(m.at) < min(MembershipMaxAge, c.opt.Resync) {
		return m.good, m.unread
	}
	good, unread, fresh := map[string]health.ClusterHealth{}, map[string]string{}, map[string]bool{}
	for _, k := range sortedKeys(want) {
		h, err := c.readMembership(ctx, want[k])
		k = phase.ClusterKey(store.Server{Product: string(h.Product), Cluster: h.Cluster})
		switch last, ok := m.good[k]; {
		case err == nil:
			good[k], fresh[k] = h, true
		case ok:
			good[k] = last // still the best word on who the servers are
		default:
			unread[k] = err.Error()
		}
	}
	m.at, m.keys, m.good, m.unread, m.fresh = c.now(), keys, good, unread, fresh
	return good, unread
}

// readMembership reads one cluster's membership (its autopilot view). A known
// cluster named by the read itself (Vault's cluster name) takes that name.
func (c *Coordinator) readMembership(ctx context.Context, srv store.Server) (health.ClusterHealth, error) {
	if c.opt.Clusters == nil {
		return health.ClusterHealth{Product: health.Product(srv.Product), Cluster: srv.Cluster},
			errors.New("no access to the server clusters is configured")
	}
	h := c.opt.Clusters.Read(ctx, srv.Product, srv.Cluster)
	if srv.Cluster != "" || h.Cluster == "" {
		h.Cluster = srv.Cluster
	}
	return h, h.Err
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

// corroborate corrects the records with the clusters and the operator's lists
// (Corroborate). The hosts left out are counted, and each logged once; the
// disputes are logged when they change.
func (c *Coordinator) corroborate(ctx context.Context, recs []store.HostRecord, nodes map[string]*api.NodeListStub) []store.HostRecord {
	members, unread := c.readMembers(ctx, recs)
	out := hostcheck.Corroborate(recs, nodes, c.backing(members, unread))
	c.reportUnbacked(out.Unbacked)
	c.reportDisputes(out.Disputes)
	return out.Records
}

// reportDisputes logs each host's dispute once per text: a record that an
// attacker and the host's agent write in turn brings the same dispute back
// again and again, and is logged once.
func (c *Coordinator) reportDisputes(disputes map[string]string) {
	m := &c.membership
	if m.disputes == nil {
		m.disputes = map[string]string{}
	}
	for _, h := range sortedKeys(disputes) {
		if m.disputes[h] != disputes[h] {
			c.log.Warn("host record disputed by its clusters", "host", h, "why", disputes[h])
			m.disputes[h] = disputes[h]
		}
	}
	if len(m.disputes) > 4*len(disputes)+1024 {
		m.disputes = maps.Clone(disputes)
	}
}

// reportUnbacked counts the hosts left out and logs each new one once.
func (c *Coordinator) reportUnbacked(hosts []string) {
	m := &c.membership
	c.metrics.state.Unbacked(len(hosts))
	if m.logged == nil {
		m.logged = map[string]bool{}
	}
	var fresh []string
	for _, h := range hosts {
		if !m.logged[h] {
			fresh = append(fresh, h)
			m.logged[h] = true
		}
	}
	if len(m.logged) > 4*len(hosts)+1024 {
		// Forget the names no longer seen, so that a flood of names that
		// come and go does not grow this set for ever.
		m.logged = make(map[string]bool, len(hosts))
		for _, h := range hosts {
			m.logged[h] = true
		}
	}
	sort.Strings(fresh)
	for _, h := range fresh {
		c.log.Warn("host record left out: the host has no Nomad node, and no server cluster, hosts_without_node entry or FleetLock allow-list backs it",
			"host", h)
	}
}

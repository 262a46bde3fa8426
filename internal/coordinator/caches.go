package coordinator

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/haltkeep"
	"github.com/rollboot/rollboot/internal/heartbeatread"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watched"
)

// The host records, from the host watch's list. The watch is a blocking query
// on the records' prefix, which lists them all (paths and ModifyIndex) at
// every change: a pass takes the watch's last list instead of listing them
// again (one per host), and reads only the records it shows changed
// since the store last read them (the store's path cache, store/cache.go): a
// pass over a cluster whose records did not change reads none. The reads stay
// in the pass, bounded like its other steps. The coordinator never writes host
// records itself, so it cannot miss a write of its own. Without a live watch
// (it has not answered yet, or it failed; or outside Run) every pass lists
// them itself.
//
// The watch lists again only once a pass took its last list (the mailbox's
// hostsTaken): when every host's sentinel appears together, a thousand agents
// write their records within a second, and a watch listing at each of them
// listed a thousand paths every few milliseconds, a tenth of the machine,
// though a pass only ever uses the last list. A change during a pass still
// wakes the next one at once: the watch asks again, from the index it last
// answered at, as soon as the pass takes the list.

// hostRecords returns the host records and those that cannot be used, from
// the host watch's list as the pass took it when the watch is live, else
// listed now. A list older than one a pass read itself is not used: the
// watch's first answer, racing with a pass that listed the records meanwhile,
// may lack records that pass saw (a host with a plan and no record is one whose
// need went away), so the pass lists them itself until the watch catches up.
func (c *Coordinator) hostRecords(ctx context.Context) ([]store.HostRecord, []store.BadRecord, error) {
	if w := c.seen.hosts; w.Live && w.Index >= c.hostsAtLeast {
		return c.opt.Store.HostsIn(ctx, w.Val)
	}
	recs, bad, index, err := c.opt.Store.HostsChecked(ctx, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	c.hostsAtLeast = max(c.hostsAtLeast, index)
	return recs, bad, nil
}

// The copies of the plans and host records (package copykeep) spare a new
// leader's first pass a read of every plan and every record.

// firstRead reports whether this pass reads every plan: the first of a term,
// or the first after a write lost to another coordinator.
func (c *Coordinator) firstRead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plans == nil
}

// The control state (the pause, and each host's request, cancel and release)
// as the last pass read it, kept while the watches of the control variable and
// of the requests have seen no change since: a pass over a cluster whose
// control did not change sends neither of the two reads (the variable and the
// list of the per-host ones) that made half of the requests of a pass over an
// idle cluster. The two blocking queries wake for any write to what Control
// reads (the control variable; any variable under the requests prefix), as
// the host watch does for the records (caches.go). The coordinator's own
// writes of the control state (a request, cancel or release carried out) are
// not waited for: the pass after one reads it again (updateControl), since the
// watch may not have answered yet. Without both watches live (not answered
// yet in this term, failed, or outside Run and Follow) every pass reads it.

// controlGen returns the generation of the control state as the pass took the
// watches' answers (the sum of the two watches', each of which only grows),
// and whether both watches are live.
func (c *Coordinator) controlGen() (uint64, bool) {
	ctl, req := c.seen.control, c.seen.requests
	return ctl.Gen + req.Gen, ctl.Live && req.Live
}

// control returns the control state: as the last pass read it while nothing
// changed since, else read now.
func (c *Coordinator) control(ctx context.Context) (store.Control, error) {
	gen, live := c.controlGen()
	if ctl, ok := c.controlRead.Get(gen, live); ok {
		return ctl, nil
	}
	ctl, err := c.opt.Store.Control(ctx)
	if err != nil {
		return store.Control{}, err
	}
	c.controlRead.Keep(gen, ctl)
	return ctl, nil
}

// updateControl is Store.UpdateControl, after which the next pass reads the
// control state again (whether or not the write went through). Only the
// decisions a pass carries out one after the other write the control state
// (apply.go: phase.Decision.StoredTogether leaves them out).
func (c *Coordinator) updateControl(ctx context.Context, fn func(*store.Control) error) error {
	_, err := c.opt.Store.UpdateControl(ctx, fn)
	c.controlRead.Forget()
	return err
}

func (c *Coordinator) watchControl(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchControl(ctx, idx, 5*time.Minute)
	c.controlAnswered(func(a *answers) *watched.Value[struct{}] { return &a.control }, idx, n, err)
	return n, err
}

// watchRequests wakes the reconcile loop when a host's request, cancel or release
// variable (<prefix>/requests/<host>) changes.
func (c *Coordinator) watchRequests(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchRequests(ctx, idx, 5*time.Minute)
	c.controlAnswered(func(a *answers) *watched.Value[struct{}] { return &a.requests }, idx, n, err)
	return n, err
}

// controlAnswered leaves the answer of one of the two watches (which: its
// place in the answers) in the mailbox.
func (c *Coordinator) controlAnswered(which func(*answers) *watched.Value[struct{}], idx, n uint64, err error) {
	c.mail.update(func(a *answers) {
		if err != nil {
			which(a).Failed()
			return
		}
		which(a).Answered(n, struct{}{}, n != idx)
	})
}

// The heartbeat indexes of a node (its last missed heartbeat and last
// re-registration, from its events) are read while its host should be
// rebooting: at every pass, for every host drained, rebooting or stuck, and
// kept while the node's ModifyIndex stays the same (package heartbeatread).
// What is kept is that of the nodes the last pass asked for, and no other.

// heartbeatIndexes is what a read of a node's events found (kept in
// Coordinator.heartbeats for the nodes the last pass asked for).
type heartbeatIndexes = heartbeatread.Indexes

// readHeartbeats puts the heartbeat indexes of each node of nodes (those of
// the hosts that should be rebooting) into it, side by side
// (NodeReadParallelism), from what was kept or streamed at the node's
// ModifyIndex, else read. It returns the error of each read that failed, by
// the position of its node.
func (c *Coordinator) readHeartbeats(ctx context.Context, nodes []*phase.NodeView) []error {
	return heartbeatread.Read(ctx, c.opt.Nodes, nodes, &c.heartbeats, &c.streamed, NodeReadParallelism)
}

// The failure budgets' halt state (package haltkeep) is read when its watch
// saw it change, at the start of each term, and at every pass while the last
// read failed.

// watchHalts follows the halt state for the passes: a change (a resume, the
// coordinator's own write) makes the next pass read it again.
func (c *Coordinator) watchHalts(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchHalts(ctx, idx, 5*time.Minute)
	c.mail.update(func(a *answers) {
		if err != nil {
			a.halts.Failed() // passes read it themselves
			return
		}
		a.halts.Answered(n, struct{}{}, n != idx)
	})
	return n, err
}

// readHalts puts the halt state in s: as kept while its watch saw no change,
// else read. A read that fails leaves s.haltsErr set: admission holds every
// host.
func (c *Coordinator) readHalts(ctx context.Context, s *snapshot) {
	p := c.halts.Read(ctx, c.seen.halts.Gen, c.seen.halts.Live)
	if p.Err != "" {
		s.haltsErr = p.Err
		return
	}
	s.halts, s.haltsIndex = p.State, p.Index
}

// withHalts runs fn on s's halt state, as package haltkeep takes it, and
// keeps what fn leaves in s.
func withHalts(s *snapshot, fn func(p *haltkeep.Pass) error) error {
	p := haltkeep.Pass{State: s.halts, Index: s.haltsIndex, Err: s.haltsErr}
	err := fn(&p)
	s.halts, s.haltsIndex = p.State, p.Index
	return err
}

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

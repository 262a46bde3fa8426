package coordinator

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// A reconcile pass first observes: it reads everything its decisions need into a
// snapshot, and decides nothing. Admission (package admission, through
// admit.go) and the phase machine (package phase) then decide from the
// snapshot alone, and apply (apply.go) writes.
// The one read that depends on a decision, the system jobs of a host admitted
// now (recorded in its plan at grant), is one admission asks for (admit.go).

// snapshot is what one pass read.
type snapshot struct {
	now time.Time
	// plans: never changed in place before the pass applies its decisions; a
	// pass that changes them (Preview) replaces the map.
	plans   map[string]store.Plan
	control store.Control
	nodes   map[string]*api.NodeListStub // every Nomad node, by ID
	groupOf map[string]string            // node ID -> the first group whose filter matches it
	// nodesByName: the nodes by name, indexed when a cycle's node is not
	// listed as its host's (nodes.go); nil until then.
	nodesByName map[string][]phase.ListedNode
	hosts       map[string]*hostView // every host with a usable record or a plan
	names       []string             // the keys of hosts, sorted
	busy        []string             // the hosts of names whose plan is under way (busyNames)
	// missing: hosts whose agent is known not to run, and why (caches.go).
	missing map[string]string
	// clusters holds the health of each server cluster (by product/cluster) of a
	// host that is pending, draining or rejoining; nil without quorum gates.
	clusters map[string]health.ClusterHealth
	// noHandOver: leadership hand-overs refused for lack of permission, by
	// host/product, with the refusal.
	noHandOver map[string]string
	// alerts: what the alerts mean for new drains; nil when not read (the
	// gate is off, or no host waits to start).
	alerts *alertgate.Verdict
	// healthGates: each health gate's verdict, by name; nil when not read
	// (none is configured, or no host waits to start).
	healthGates map[string]healthgate.Verdict
	// optOut: the pending hosts whose node's meta rollboot_pause holds them,
	// with its value (optout.go).
	optOut map[string]string
	// workloads: what the workload blockers read (admitreads.go); nil when
	// nothing was read.
	workloads *workloadView
	// capacity: what the capacity gate read; nil until admission asks for
	// something (admitreads.go).
	capacity *capacityView
	// statuses: the groups as admission saw them in this pass (admit).
	statuses []policy.GroupStatus
	// health: the workloads of the hosts that wait for them to be healthy
	// after their reboot (rejoinhealth.go).
	health map[string]*rejoin.Observed
	// preview: the snapshot of `rollboot plan`, which asks the approval
	// webhook nothing; previewAnswers stand in for its answers (holds.go).
	preview        bool
	previewAnswers map[string]admission.WebhookAnswer
	// waves: the waves as this pass judged them (holds.go).
	waves waveView
	// halts: the failure budgets' halt state and its variable's index
	// (package haltkeep); haltsErr: why it cannot be read ("" when it can, or when no
	// budget needs it).
	halts      policy.HaltState
	haltsIndex uint64
	haltsErr   string
}

// hostView is what a pass knows of one host; built by each pass, its own.
type hostView struct {
	rec   *store.HostRecord // nil: no usable record
	node  *phase.NodeView   // nil: no Nomad node, or an unknown one
	group string
	// jobs are the system jobs running on the node, read for a host admitted
	// now (jobsRead).
	jobs     []string
	jobsRead bool
	// err: a read this host's decision needs failed; it is skipped this pass.
	err error
}

// observe reads everything a pass decides on.
func (c *Coordinator) observe(ctx context.Context) (*snapshot, error) {
	// A new leader reads every plan and every host record: the two loads go
	// side by side, each ReadParallelism reads at a time, so that together they
	// stay well under the connections Nomad accepts from one client (limits
	// http_max_conns_per_client, 100 by default: nomad/structs/config/limits.go
	// DefaultLimits) beside the watches.
	var (
		plans    map[string]store.Plan
		plansErr error
		loaded   sync.WaitGroup
	)
	first := c.firstRead()
	if first {
		c.copies.Load(ctx) // most plans and records from their copies (package copykeep)
	}
	loaded.Go(func() { plans, plansErr = c.loadPlans(ctx) })
	recs, badRecs, err := c.hostRecords(ctx)
	loaded.Wait()
	if first {
		c.copies.Used() // logs how many it took from them
	}
	if plansErr != nil {
		return nil, plansErr
	}
	if err != nil {
		return nil, err
	}
	ctl, err := c.control(ctx) // caches.go
	if err != nil {
		return nil, err
	}
	nodes, groupOf, err := c.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	recs, missing := c.checkRecords(ctx, recs, badRecs, nodes, ctl)
	now := c.now()
	// An expired pause is ignored (store.Control.InForce).
	s := &snapshot{now: now, plans: plans, control: ctl.InForce(now), nodes: nodes, groupOf: groupOf, missing: missing}
	c.hostViews(s, recs)
	c.readDetails(ctx, s)
	c.readHalts(ctx, s) // before the waves, which forget what a resume lifted (package haltkeep)
	c.observeWaves(ctx, s)
	s.noHandOver = maps.Clone(c.noHandOver)
	return s, nil
}

// readDetails reads what the pass decides on beyond the lists: opt-outs, node
// events, system jobs, rejoin health, and beside them the clusters' health.
func (c *Coordinator) readDetails(ctx context.Context, s *snapshot) {
	var clusters sync.WaitGroup
	clusters.Go(func() { c.readClusters(ctx, s) })
	c.readOptOut(ctx, s)
	c.readNodeDetails(ctx, s)
	c.readRejoinHealth(ctx, s)
	clusters.Wait()
}

// loadPlans returns the plans: the coordinator's own writes, read once after it
// starts leading (or after a write lost to another coordinator's).
func (c *Coordinator) loadPlans(ctx context.Context) (map[string]store.Plan, error) {
	c.mu.Lock()
	plans := c.plans
	c.mu.Unlock()
	if plans != nil {
		return plans, nil
	}
	plans, badPlans, err := c.opt.Store.PlansChecked(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range badPlans {
		// Used with what could be read; the next write of the plan repairs it.
		c.log.Warn("plan partly unreadable", "host", b.Host, "path", b.Path, "err", b.Err)
	}
	c.mu.Lock()
	c.plans = plans
	c.plansGen++
	c.mu.Unlock()
	return plans, nil
}

// hostViews gives every host with a usable record or a plan its node and
// group.
func (c *Coordinator) hostViews(s *snapshot, recs []store.HostRecord) {
	s.hosts = make(map[string]*hostView, len(recs))
	for i := range recs {
		r := &recs[i]
		hv := &hostView{rec: r, group: c.groupOfHost(r, s.groupOf)}
		if n := s.nodes[r.NodeID]; r.NodeID != "" && n != nil {
			hv.node = phase.ViewOfNode(n)
		}
		s.hosts[r.Host] = hv
	}
	for name, p := range s.plans {
		if _, ok := s.hosts[name]; !ok {
			// No usable record (none, or ignored): the node the plan took out
			// of service is still the one to give back.
			var node *phase.NodeView
			if n := s.nodes[p.NodeID]; n != nil {
				node = phase.ViewOfNode(n)
			}
			s.hosts[name] = &hostView{group: p.Group, node: node}
		}
	}
	s.names = slices.Sorted(maps.Keys(s.hosts))
	s.listBusy()
}

// groupOfHost is the group of the host of r: its node's (groupOf), else the
// default group; a host without a node says its group (FleetLock).
func (c *Coordinator) groupOfHost(r *store.HostRecord, groupOf map[string]string) string {
	if r.NodeID != "" {
		if g, ok := groupOf[r.NodeID]; ok {
			return g
		}
	} else if r.Group != "" && c.opt.Rules.Known(r.Group) {
		return r.Group
	}
	return c.opt.DefaultGroup.Name
}

// NodeReadParallelism bounds the node reads of a pass sent at once (the events
// of the nodes of hosts that should be rebooting, a host's allocations): one
// after the other, each is a round trip the next cycle's step waits behind.
// With the rejoining hosts' allocation watches and the loop's, 16 stay under
// the 100 connections Nomad accepts from one client (http_max_conns_per_client).
const NodeReadParallelism = 16

// readNodeDetails reads what the node list does not say and a phase needs: the
// node's events while the host should be rebooting (did it miss heartbeats and
// come back?), side by side, then its system jobs while it rejoins.
func (c *Coordinator) readNodeDetails(ctx context.Context, s *snapshot) {
	var events, jobs []*hostView
	before := map[string]bool{}
	defer func() { c.beforeChecks = before }()
	for _, name := range busyNames(s) {
		hv, p := s.hosts[name], s.plans[name]
		if hv.node == nil {
			continue
		}
		if phase.AwaitsReport(hv.rec, p, true) || hv.node.Status != api.NodeStatusReady {
			// Also of a host this pass may move to rejoining: its node's
			// allocations are not watched before the report, nor while the
			// node is not ready (package rejoinwatch).
			before[name] = true
		}
		// A stuck host that had come back keeps meeting the rejoin checks.
		rejoins := p.Phase == store.PhaseRejoining || (p.Phase == store.PhaseStuck && !p.Timeline[store.PhaseRejoining].IsZero())
		if p.Phase != store.PhaseDrained && p.Phase != store.PhaseRebooting && p.Phase != store.PhaseStuck && !rejoins {
			continue
		}
		if p.Phase == store.PhaseDrained || p.Phase == store.PhaseRebooting || p.Phase == store.PhaseStuck {
			events = append(events, hv)
		}
		if rejoins && p.EligibleBefore && hv.node.Eligible && !phase.AwaitsReport(hv.rec, p, true) {
			jobs = append(jobs, hv) // read once the agent reported (stepRejoining)
		}
	}
	c.streamed.Prune(s.nodes)
	nodes := make([]*phase.NodeView, len(events))
	for i, hv := range events {
		nodes[i] = hv.node
	}
	for i, err := range c.readHeartbeats(ctx, nodes) { // caches.go
		events[i].err = err
	}
	parallel.Each(len(jobs), NodeReadParallelism, nil, func(i int) { // once per node (allocs.OnNode)
		if hv := jobs[i]; hv.err == nil {
			hv.err = c.systemRunning(ctx, hv.node)
		}
	})
}

// readClusters reads, once per pass, the health of every server cluster whose
// gates a host may meet in this pass: to be admitted and hand its leadership
// over (pending, draining), or to be back (rejoining, and stuck: a stuck host
// that came back leaves stuck only once its servers are back too; drained and
// rebooting for a host without a node, whose reboot its clusters show).
func (c *Coordinator) readClusters(ctx context.Context, s *snapshot) {
	if c.opt.Clusters == nil {
		return
	}
	// The clusters read by this pass to corroborate the records: as current.
	s.clusters = c.members.Fresh()
	for _, name := range busyNames(s) {
		hv := s.hosts[name]
		switch s.plans[name].Phase {
		case store.PhasePending, store.PhaseDraining, store.PhaseRejoining, store.PhaseStuck:
		case store.PhaseDrained, store.PhaseRebooting:
			if hv.node != nil {
				continue
			}
			// A host without a node is seen back through its servers'
			// clusters (rebootSeen).
		default:
			continue
		}
		if hv.rec == nil {
			continue
		}
		for _, srv := range hv.rec.Servers {
			k := phase.ClusterKey(srv)
			if _, ok := s.clusters[k]; !ok {
				s.clusters[k] = c.opt.Clusters.Read(ctx, srv.Product, srv.Cluster)
			}
		}
	}
}

// systemJobs returns the system jobs running on a node, from its allocations
// as the pass sees them (allocs.OnNode).
func (c *Coordinator) systemJobs(ctx context.Context, nodeID string) ([]string, error) {
	allocs, err := c.allocs.OnNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	return systemJobsOf(allocs), nil
}

// systemJobsOf returns the system jobs with a running allocation among allocs,
// sorted.
func systemJobsOf(allocs []*api.Allocation) []string {
	set := map[string]bool{}
	for _, a := range allocs {
		if a.Job != nil && a.Job.Type != nil && *a.Job.Type == api.JobTypeSystem &&
			a.DesiredStatus == api.AllocDesiredStatusRun && a.ClientStatus == api.AllocClientStatusRunning {
			set[a.Namespace+"/"+a.JobID] = true
		}
	}
	out := make([]string, 0, len(set))
	for j := range set {
		out = append(out, j)
	}
	sort.Strings(out)
	return out
}

func (c *Coordinator) systemRunning(ctx context.Context, v *phase.NodeView) error {
	jobs, err := c.systemJobs(ctx, v.ID)
	if err != nil {
		return err
	}
	v.SystemRunning = map[string]bool{}
	for _, j := range jobs {
		v.SystemRunning[j] = true
	}
	return nil
}

// busyNames returns the hosts of s whose plan is under way (any phase but
// idle), sorted: the reads and the steps that only look at such hosts (the
// node events of rebooting hosts, the clusters of the hosts that meet server
// gates, the hosts on their way out for the capacity gate, the admission
// queue) walk them. They are listed once, when the snapshot's hosts and plans
// are set (listBusy): in a rollout every host is under way, and a pass walks
// them several times.
func busyNames(s *snapshot) []string { return s.busy }

// listBusy lists the hosts under way for busyNames. Whatever sets s's hosts or
// changes its plans calls it after: observe once it has the hosts, Preview and
// a hand-out once they put their pending plans in.
// A new slice each time: a hand-out's snapshot is a copy of its pass's.
func (s *snapshot) listBusy() {
	var busy []string
	for name, p := range s.plans {
		if !planUnderWay(p) {
			continue
		}
		if _, ok := s.hosts[name]; ok {
			busy = append(busy, name)
		}
	}
	slices.Sort(busy)
	s.busy = busy
}

// plansUnderWay copies the plans under way (any phase but idle) of plans: all
// that the loop looks at between passes (the allocation watches), which answer
// the same from them as from every plan.
func plansUnderWay(plans map[string]store.Plan) map[string]store.Plan {
	out := map[string]store.Plan{}
	for name, p := range plans {
		if planUnderWay(p) {
			out[name] = p
		}
	}
	return out
}

// planUnderWay reports whether p is under way: in any phase but idle.
func planUnderWay(p store.Plan) bool { return p.Phase != "" && p.Phase != store.PhaseIdle }

// nothingToDecide reports whether the phase machine has nothing to decide for a host this
// pass, without building its Input: the host is idle (an idle plan, or none
// and no record), its record does not ask for a reboot, and no request, cancel or release names
// it. phase.Step then keeps its plan as it is, waits for nothing and writes nothing,
// so the pass only counts it among the hosts not waiting. Most hosts of a large
// cluster are idle at any time.
//
// Each condition is one phase.Step reads for an idle host (decide.go: Need, the
// release at the top of step, staleDrain, stepIdle, and the cancel it clears);
// TestQuietSteps holds them together.
//
// underWay: the host's plan is under way (any phase but idle). maxUptime: the
// max_uptime of the host's group; a host whose uptime need has fallen due
// (phase.UptimeNeed) is stepped. One not due yet is looked at again by the
// next pass, at the latest the resync's.
func nothingToDecide(s *snapshot, hv *hostView, name string, underWay bool, maxUptime time.Duration) bool {
	if hv.rec != nil && hv.rec.RebootRequired {
		return false
	}
	if due, ok := policy.UptimeDue(name, uptimeBoot(hv.rec), maxUptime); ok && !s.now.Before(due) {
		return false
	}
	if underWay {
		return false
	}
	if hv.rec == nil && hv.node == nil {
		return false // a host gone, whose plan may be deleted (forgotten)
	}
	if hv.rec != nil && s.plans[name].ModifyIndex == 0 {
		return false // a host first seen, whose idle plan is stored (stepIdle)
	}
	if n := hv.node; n != nil && n.DrainGrant != "" && (n.Draining || !n.Eligible) && phase.IsStaleDrain(n, s.plans[name]) {
		return false // a drain of ours that no cycle holds (staleDrain); the plan looked up only then
	}
	ctl := &s.control
	if _, ok := ctl.Requests[name]; ok {
		return false
	}
	if _, ok := ctl.Cancels[name]; ok {
		return false
	}
	_, ok := ctl.Releases[name]
	return !ok
}

// uptimeBoot is the boot time a record gives (zero without a record).
func uptimeBoot(rec *store.HostRecord) time.Time {
	if rec == nil {
		return time.Time{}
	}
	return rec.BootedAt
}

// Package coordinator runs rollboot's policy brain: a level-triggered reconcile loop
// that reads the hosts' records, the Nomad nodes and its own plans, decides with the
// pure phase machine (decide.go) and the group budgets (package policy), and applies
// idempotent steps to Nomad. A coordinator killed at any instant and replaced by
// another continues from what is stored.
package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// NodesAPI is the part of the Nomad nodes API the coordinator uses; *api.Nodes
// implements it.
type NodesAPI interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
	UpdateDrainOpts(nodeID string, opts *api.DrainOptions, q *api.WriteOptions) (*api.NodeDrainUpdateResponse, error)
	ToggleEligibility(nodeID string, eligible bool, q *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error)
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
}

// ClusterAccess reads the health of the Nomad, Consul and Vault server clusters
// and hands their leadership over.
type ClusterAccess interface {
	Read(ctx context.Context, product, cluster string) health.ClusterHealth
	HandOver(ctx context.Context, product, serverID string) error
}

// GroupSpec is a configured group: its budget and schedule, and the Nomad filter
// expression that selects its nodes (evaluated by Nomad, on the full node).
type GroupSpec struct {
	policy.Group
	Filter string // "" matches every node
}

// Options configure a coordinator.
type Options struct {
	Nodes  NodesAPI
	Store  *store.Store
	Groups []GroupSpec // in match order; nodes no group matches fall in DefaultGroup
	// DefaultGroup holds the nodes no group matches (concurrency 1 by default).
	DefaultGroup policy.Group
	Timing       Timing
	HistorySize  int
	// Clusters gives the server quorum gates their view of the server clusters.
	// Without it, hosts that run servers are never granted.
	Clusters ClusterAccess
	// ServerStableFor is how long a server must have been stable (autopilot's
	// StableSince) after its reboot before its host's slot is freed.
	ServerStableFor time.Duration
	// HoldOnDeniedHandOver: when a leadership hand-over is refused for lack of
	// permission, keep the host waiting instead of rebooting the leader.
	HoldOnDeniedHandOver bool
	// Resync is the period of a full reconcile even without any change seen.
	Resync time.Duration
	// Registry receives the coordinator's metrics (nil: a registry of its own,
	// see Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	Now      func() time.Time // default time.Now

	// Jobs, when set, tells which hosts lost their agent from the allocations of
	// AgentJob (default "rollboot") in AgentJobNamespace (records.go).
	Jobs              JobsAPI
	AgentJob          string
	AgentJobNamespace string
}

// Coordinator is one coordinator instance. Only the elected one runs Run.
type Coordinator struct {
	opt Options
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	plans  map[string]store.Plan // our own writes; loaded on start
	status []HostStatus
	// noHandOver: hand-overs refused for lack of permission, by host/product, with
	// the refusal.
	noHandOver map[string]string
	// reported: what checkRecords last logged; ignored: the records it dropped.
	reported string
	ignored  []store.BadRecord

	metrics *passMetrics
	overrun Overrun
	// changed: a pass applied a change (wake.go: the next pass runs at once).
	changed bool
}

// New returns a coordinator.
func New(opt Options) *Coordinator {
	c := &Coordinator{opt: opt, log: opt.Log, now: opt.Now}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.opt.DefaultGroup.Name == "" {
		c.opt.DefaultGroup = policy.Group{Name: policy.DefaultGroupName, Concurrency: 1}
	}
	if c.opt.Resync <= 0 {
		c.opt.Resync = 30 * time.Second
	}
	c.metrics = newPassMetrics(c.opt.Registry)
	return c
}

// HostStatus is the coordinator's view of one host after a reconcile.
type HostStatus struct {
	Host    string
	Group   string
	Phase   string
	Since   time.Time
	Waiting string
	// AgentMissing says why the host's agent is known not to run ("" if it runs
	// or cannot be told).
	AgentMissing string
}

// Status returns what the last reconcile saw.
func (c *Coordinator) Status() []HostStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]HostStatus(nil), c.status...)
}

// Run reconciles whenever the host records, the control variable or the Nomad
// nodes change, again at once after a pass that changed something, when a timer
// of a decision runs out, and at least every Resync, until ctx ends (wake.go).
func (c *Coordinator) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(3)
	go func() { defer wg.Done(); c.watch(ctx, poke, c.watchVars) }()
	go func() { defer wg.Done(); c.watch(ctx, poke, c.watchNodes) }()
	go func() { defer wg.Done(); c.watch(ctx, poke, c.watchControl) }()
	wg.Add(1)
	go func() { defer wg.Done(); c.watch(ctx, poke, c.watchRequests) }()

	allocs := &allocWatchers{ctx: ctx, poke: poke, c: c}
	defer allocs.stop()
	if c.agentJob() != "" {
		wg.Add(1)
		go func() { defer wg.Done(); c.watch(ctx, poke, c.watchAgentJob) }()
	}

	c.mu.Lock()
	c.plans = nil // reload: another coordinator may have written since we last led
	c.mu.Unlock()
	t := time.NewTicker(c.opt.Resync)
	defer t.Stop()
	chained, failed := 0, 0
	for {
		c.mu.Lock()
		c.changed = false
		c.mu.Unlock()
		start := time.Now()
		err := c.ReconcileOnce(ctx)
		c.observePass(time.Since(start), time.Now())
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.log.Warn("reconcile failed", "err", err)
			failed++
		} else {
			failed = 0
		}
		c.mu.Lock()
		changed, plans := c.changed, maps.Clone(c.plans)
		c.mu.Unlock()
		allocs.set(plans)
		if changed && chained < maxChainedPasses {
			// Our own writes wake none of our watches: decide again now.
			chained++
			continue
		}
		if changed {
			c.log.Warn("decisions kept changing: waiting for a change, a timer or the resync before the next pass",
				"passes", chained+1)
		}
		chained = 0
		if !c.waitForPass(ctx, kick, t.C, plans, failed) {
			return nil
		}
	}
}

// watch runs a blocking-query loop and pokes the reconcile loop on every change.
func (c *Coordinator) watch(ctx context.Context, poke func(), next func(ctx context.Context, idx uint64) (uint64, error)) {
	var idx uint64
	fails := 0
	for ctx.Err() == nil {
		n, err := next(ctx, idx)
		if err != nil {
			fails++
			// Back off on errors (a leader election, a 500) without spinning.
			wait := policy.Backoff(100*time.Millisecond, 5*time.Second, fails)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			idx = 0
			continue
		}
		fails = 0
		if n != idx {
			poke()
		}
		if n < idx {
			n = 0 // the index went backwards (a restored snapshot): start over
		}
		idx = n
	}
}

func (c *Coordinator) watchVars(ctx context.Context, idx uint64) (uint64, error) {
	_, n, err := c.opt.Store.Hosts(ctx, idx, 5*time.Minute)
	return n, err
}

func (c *Coordinator) watchControl(ctx context.Context, idx uint64) (uint64, error) {
	return c.opt.Store.WatchControl(ctx, idx, 5*time.Minute)
}

// watchRequests wakes the reconcile loop when a host's request, cancel or release
// variable (<prefix>/requests/<host>) changes.
func (c *Coordinator) watchRequests(ctx context.Context, idx uint64) (uint64, error) {
	return c.opt.Store.WatchRequests(ctx, idx, 5*time.Minute)
}

func (c *Coordinator) watchNodes(ctx context.Context, idx uint64) (uint64, error) {
	q := (&api.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
	_, meta, err := c.opt.Nodes.List(q)
	if err != nil {
		return 0, err
	}
	return meta.LastIndex, nil
}

// ReconcileOnce reads everything, decides for every host and applies the result.
func (c *Coordinator) ReconcileOnce(ctx context.Context) error {
	st := c.opt.Store
	c.mu.Lock()
	plans := c.plans
	c.mu.Unlock()
	if plans == nil {
		p, badPlans, err := st.PlansChecked(ctx)
		if err != nil {
			return err
		}
		for _, b := range badPlans {
			// Used with what could be read; the next write of the plan repairs it.
			c.log.Warn("plan partly unreadable", "host", b.Host, "path", b.Path, "err", b.Err)
		}
		plans = p
		c.mu.Lock()
		c.plans = p
		c.mu.Unlock()
	}
	hosts, badRecs, _, err := st.HostsChecked(ctx, 0, 0)
	if err != nil {
		return err
	}
	ctl, err := st.Control(ctx)
	if err != nil {
		return err
	}
	nodes, groupOf, err := c.readNodes(ctx)
	if err != nil {
		return err
	}
	hosts, missing := c.checkRecords(ctx, hosts, badRecs, nodes, ctl)
	now := c.now()

	// Group budgets.
	type hostInfo struct {
		rec   *store.HostRecord
		node  *api.NodeListStub
		group string
	}
	infos := map[string]*hostInfo{}
	var names []string
	for i := range hosts {
		h := &hosts[i]
		hi := &hostInfo{rec: h, group: c.opt.DefaultGroup.Name}
		if h.NodeID != "" {
			hi.node = nodes[h.NodeID]
			if g, ok := groupOf[h.NodeID]; ok {
				hi.group = g
			}
		} else if h.Group != "" && c.knownGroup(h.Group) {
			hi.group = h.Group // a host without a node says its group (FleetLock)
		}
		infos[h.Host] = hi
		names = append(names, h.Host)
	}
	for name := range plans {
		if _, ok := infos[name]; !ok {
			infos[name] = &hostInfo{group: plans[name].Group}
			if id := plans[name].NodeID; id != "" {
				// No usable record (none, or ignored): the node the plan took
				// out of service is still the one to give back.
				infos[name].node = nodes[id]
			}
			names = append(names, name)
		}
	}
	sort.Strings(names)

	groups := c.groupStatuses(now, ctl, nodes, groupOf, plans, func(h string) string { return infos[h].group })
	var queue []policy.Request
	for _, name := range names {
		p, hi := plans[name], infos[name]
		if p.Phase != store.PhasePending || now.Before(p.NextTry) || hi.rec == nil {
			continue
		}
		if hi.node != nil && (hi.node.Status != "ready" || (hi.node.Drain && drainGrant(hi.node) == "")) {
			continue
		}
		if missing[name] != "" {
			continue // nobody would reboot it after its drain: held, and why is shown
		}
		queue = append(queue, policy.Request{Host: name, Group: hi.group, RequestedAt: p.RequestedAt})
	}
	adm := policy.Admit(groups, queue)
	waitReason := map[string]string{}
	for _, w := range adm.Waiting {
		waitReason[w.Host] = w.Reason
	}
	for name, why := range missing {
		waitReason[name] = why
	}
	admitted := map[string]bool{}
	// Keep a coordinator candidate in service. After a reboot a drained node stays
	// ineligible until the coordinator restores it, and an agent deployed as a
	// system job gets no allocation there until then; with every candidate's host
	// drained or rebooting at once, nobody would be left to do it.
	spare := 0
	isCandidate := func(name string) bool {
		return infos[name].rec != nil && slices.Contains(infos[name].rec.Roles, store.RoleCandidate)
	}
	for _, name := range names {
		hi := infos[name]
		if isCandidate(name) && !plans[name].Active() && (hi.node == nil || hi.node.Status == "ready") {
			spare++
		}
	}
	cl := c.clusterCache()
	var sealed []string // hosts whose Vault server is sealed
	for _, name := range names {
		if r := infos[name].rec; r != nil && r.VaultSealed {
			sealed = append(sealed, name)
		}
	}
	outServers := map[string]string{} // product/cluster -> host out of service (or admitted now)
	for _, name := range names {
		if plans[name].Active() && infos[name].rec != nil {
			for _, srv := range infos[name].rec.Servers {
				outServers[srv.Product+"/"+srv.Cluster] = name
			}
		}
	}
	for _, r := range adm.Admitted {
		if isCandidate(r.Host) {
			if spare <= 1 {
				waitReason[r.Host] = "it would take the last coordinator candidate in service out"
				continue
			}
		}
		if why := c.serverGate(ctx, cl, infos[r.Host].rec, outServers, sealed); why != "" {
			waitReason[r.Host] = why
			continue
		}
		if isCandidate(r.Host) {
			spare--
		}
		for _, srv := range infos[r.Host].rec.Servers {
			outServers[srv.Product+"/"+srv.Cluster] = r.Host
		}
		admitted[r.Host] = true
	}

	var status []HostStatus
	var firstErr error
	for _, name := range names {
		hi := infos[name]
		p := plans[name]
		if p.Host == "" {
			p = store.Plan{Host: name, Phase: store.PhaseIdle}
		}
		in := Input{
			Now: now, Plan: p, Host: hi.rec, Paused: ctl.Paused,
			CancelAt: ctl.Cancels[name], ReleaseAt: ctl.Releases[name],
			Admitted: admitted[name], Timing: c.opt.Timing,
		}
		if r, ok := ctl.Requests[name]; ok {
			in.Request = &r
		}
		if hi.node != nil {
			in.Node = nodeView(hi.node)
			if p.Phase == store.PhaseDrained || p.Phase == store.PhaseRebooting || p.Phase == store.PhaseStuck {
				if err := c.reregisteredIndex(ctx, in.Node); err != nil {
					firstErr = errors.Join(firstErr, err)
					continue
				}
			}
			if p.Phase == store.PhaseRejoining && p.EligibleBefore && in.Node.Eligible {
				if err := c.systemRunning(ctx, in.Node); err != nil {
					firstErr = errors.Join(firstErr, err)
					continue
				}
			}
		}
		if hi.rec != nil && c.opt.Clusters != nil {
			in.ServerGates = true
			switch p.Phase {
			case store.PhasePending, store.PhaseDraining:
				in.Leads, in.HandOverBlocked = c.leads(ctx, cl, hi.rec)
			case store.PhaseRejoining:
				in.PostGate = c.postGate(ctx, cl, hi.rec, now)
			}
		}
		if in.Admitted {
			in.NewGrantID = newGrantID()
			if in.Node != nil {
				jobs, err := c.systemJobs(ctx, in.Node.ID)
				if err != nil {
					firstErr = errors.Join(firstErr, err)
					continue
				}
				in.SystemJobs = jobs
			}
		}
		d := Step(in)
		if d.Plan.Phase == store.PhasePending || d.StartDrain {
			d.Plan.Group = hi.group
		}
		if d.Waiting != "" && waitReason[name] != "" && p.Phase == store.PhasePending && d.Waiting == "waiting for a slot in its group or for its window" {
			d.Waiting = waitReason[name]
		}
		if d.Plan.Waiting != d.Waiting && (d.Write || p.Phase != store.PhaseIdle) {
			// Keep the reason in the plan for `rollboot status`; it changes
			// rarely, so this adds few writes.
			d.Plan.Waiting, d.Write = d.Waiting, true
		}
		if err := c.apply(ctx, in, d, ctl); err != nil {
			firstErr = errors.Join(firstErr, fmt.Errorf("host %s: %w", name, err))
		} else {
			if cancelDone(in, d.Plan) {
				// The cancel is carried out: forget it, so cancels do not pile up.
				firstErr = errors.Join(firstErr, c.clearCancel(ctx, name, in.CancelAt))
			}
			if d.changes() {
				c.mu.Lock()
				c.changed = true
				c.mu.Unlock()
			}
		}
		c.mu.Lock()
		cur := c.plans[name]
		c.mu.Unlock()
		if cur.Host == "" {
			cur = d.Plan
		}
		status = append(status, HostStatus{Host: name, Group: hi.group, Phase: cur.Phase, Since: cur.PhaseSince, Waiting: d.Waiting,
			AgentMissing: missing[name]})
	}
	c.mu.Lock()
	c.status = status
	c.mu.Unlock()
	return firstErr
}

// knownGroup reports whether name is a configured group or the default one.
func (c *Coordinator) knownGroup(name string) bool {
	if name == c.opt.DefaultGroup.Name {
		return true
	}
	for _, g := range c.opt.Groups {
		if g.Name == name {
			return true
		}
	}
	return false
}

// groupStatuses computes each group's size, active hosts and otherwise-unavailable
// nodes, and holds a group whose window does not allow a drain to start now.
func (c *Coordinator) groupStatuses(now time.Time, ctl store.Control, nodes map[string]*api.NodeListStub,
	groupOf map[string]string, plans map[string]store.Plan, groupOfHost func(string) string) []policy.GroupStatus {
	all := append([]policy.Group{}, c.opt.DefaultGroup)
	for _, g := range c.opt.Groups {
		all = append(all, g.Group)
	}
	byName := map[string]*policy.GroupStatus{}
	var out []*policy.GroupStatus
	for _, g := range all {
		gs := &policy.GroupStatus{Group: g}
		if ctl.Paused {
			gs.Hold = "paused"
			if ctl.PauseReason != "" {
				gs.Hold += ": " + ctl.PauseReason
			}
		} else if ok, why := g.Schedule.CanStartDrain(now, c.opt.Timing.DrainDeadline); !ok {
			gs.Hold = why
		}
		byName[g.Name] = gs
		out = append(out, gs)
	}
	activeNode := map[string]bool{}
	for name, p := range plans {
		if !p.Active() {
			continue
		}
		if gs := byName[groupOfHost(name)]; gs != nil {
			gs.Active++
		}
		if p.NodeID != "" {
			activeNode[p.NodeID] = true
		}
	}
	for id, n := range nodes {
		g := c.opt.DefaultGroup.Name
		if name, ok := groupOf[id]; ok {
			g = name
		}
		gs := byName[g]
		if gs == nil {
			continue
		}
		gs.Size++
		if !activeNode[id] && (n.Status != "ready" || n.SchedulingEligibility != "eligible") {
			gs.Unavailable++
		}
	}
	res := make([]policy.GroupStatus, 0, len(out))
	for _, gs := range out {
		res = append(res, *gs)
	}
	return res
}

// readNodes lists every node, and the nodes of each group with Nomad's own filter
// (evaluated by Nomad on the full node, so Meta and Attributes work), first match wins.
func (c *Coordinator) readNodes(ctx context.Context) (map[string]*api.NodeListStub, map[string]string, error) {
	q := (&api.QueryOptions{}).WithContext(ctx)
	list, _, err := c.opt.Nodes.List(q)
	if err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	groupOf := map[string]string{}
	for _, g := range c.opt.Groups {
		var members []*api.NodeListStub
		if g.Filter == "" {
			members = list
		} else {
			q := (&api.QueryOptions{Filter: g.Filter}).WithContext(ctx)
			members, _, err = c.opt.Nodes.List(q)
			if err != nil {
				return nil, nil, fmt.Errorf("list nodes of group %s: %w", g.Name, err)
			}
		}
		for _, n := range members {
			if _, ok := groupOf[n.ID]; !ok {
				groupOf[n.ID] = g.Name
			}
		}
	}
	return nodes, groupOf, nil
}

func nodeView(n *api.NodeListStub) *NodeView {
	v := &NodeView{ID: n.ID, Status: n.Status, Eligible: n.SchedulingEligibility == "eligible", Draining: n.Drain,
		ModifyIndex: n.ModifyIndex}
	if n.LastDrain != nil {
		v.DrainStatus = string(n.LastDrain.Status)
		v.DrainGrant = n.LastDrain.Meta[metaGrant]
	}
	return v
}

func drainGrant(n *api.NodeListStub) string {
	if n.LastDrain == nil {
		return ""
	}
	return n.LastDrain.Meta[metaGrant]
}

// Drain meta keys: they tell an operator (and a restarted coordinator) that rollboot
// started a drain, for which grant and why (like nomad-autoscaler's drained_by).
const (
	metaGrant   = "rollboot_grant"
	metaMessage = "message"
	metaBy      = "drained_by"
)

// Node event messages that tell a node missed heartbeats or came back from it.
const (
	// nomad/heartbeat.go NodeHeartbeatEventMissed: the node went down or
	// disconnected.
	eventHeartbeatMissed = "Node heartbeat missed"
	// nomad/node_endpoint.go NodeHeartbeatEventReregistered: a down node
	// heartbeats again (Nomad ≥ 1.5 keeps the status at registration).
	eventReregisteredByHeartbeat = "Node reregistered by heartbeat"
	// nomad/state/state_store.go NodeRegisterEventReregistered: a down node
	// registered with a new status (before Nomad 1.5).
	eventReregistered = "Node re-registered"
)

// reregisteredIndex reads the node's events (the list stub has none) for the last
// missed heartbeat and the last re-registration.
func (c *Coordinator) reregisteredIndex(ctx context.Context, v *NodeView) error {
	n, _, err := c.opt.Nodes.Info(v.ID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read node %s: %w", v.ID, err)
	}
	for _, e := range n.Events {
		switch e.Message {
		case eventReregistered, eventReregisteredByHeartbeat:
			v.ReregisteredIndex = max(v.ReregisteredIndex, e.CreateIndex)
		case eventHeartbeatMissed:
			v.MissedHeartbeatIndex = max(v.MissedHeartbeatIndex, e.CreateIndex)
		}
	}
	return nil
}

func (c *Coordinator) systemJobs(ctx context.Context, nodeID string) ([]string, error) {
	allocs, _, err := c.opt.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("allocations of node %s: %w", nodeID, err)
	}
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
	return out, nil
}

func (c *Coordinator) systemRunning(ctx context.Context, v *NodeView) error {
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

// apply carries out a decision. Steps that take a node out of service (a drain) run
// after the plan that records them is stored; steps that give it back (cancel a
// drain, restore eligibility) run before the plan that forgets them. So a crash at
// any point leaves a state from which the next reconcile finishes the job.
func (c *Coordinator) apply(ctx context.Context, in Input, d Decision, ctl store.Control) error {
	st := c.opt.Store
	p := d.Plan
	log := c.log.With("host", p.Host, "phase", p.Phase, "group", p.Group)
	w := (&api.WriteOptions{}).WithContext(ctx)
	if d.CancelDrain && in.Node != nil {
		if _, err := c.opt.Nodes.UpdateDrainOpts(in.Node.ID, &api.DrainOptions{DrainSpec: nil, MarkEligible: d.MarkEligible}, w); err != nil {
			return fmt.Errorf("cancel drain of node %s: %w", in.Node.ID, err)
		}
		log.Info("drain canceled", "node_id", in.Node.ID, "mark_eligible", d.MarkEligible)
	}
	if d.SetEligible && in.Node != nil {
		if _, err := c.opt.Nodes.ToggleEligibility(in.Node.ID, true, w); err != nil {
			return fmt.Errorf("restore eligibility of node %s: %w", in.Node.ID, err)
		}
		log.Info("eligibility restored", "node_id", in.Node.ID)
	}
	if d.ClearRequest {
		// Before the plan says the cycle is over, so that whoever sees it over
		// also sees the request gone; a crash in between only drops a request
		// whose reboot is done.
		if err := c.clearControl(ctx, p.Host, true, false); err != nil {
			return err
		}
	}
	if d.History != nil {
		// Before the plan forgets the cycle: the record's path is fixed by the
		// cycle, so writing it again after a crash or an error is harmless.
		if err := st.AppendHistory(ctx, *d.History, c.opt.HistorySize); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if d.Write {
		p.ModifyIndex = in.Plan.ModifyIndex
		idx, err := st.PutPlan(ctx, p)
		if errors.Is(err, store.ErrConflict) {
			// Another coordinator wrote: forget our cache and decide again.
			c.mu.Lock()
			c.plans = nil
			c.mu.Unlock()
			return err
		}
		if err != nil {
			return err
		}
		p.ModifyIndex = idx
		c.mu.Lock()
		if c.plans != nil {
			c.plans[p.Host] = p
		}
		c.mu.Unlock()
		if d.Event != "" {
			log.Info(d.Event, "reason", p.Reason, "last_error", p.LastError)
		}
	}
	for _, product := range d.HandOver {
		if err := c.handOver(ctx, in.Host, product); err != nil {
			return err
		}
	}
	if d.StartDrain && in.Node != nil {
		spec := &api.DrainSpec{IgnoreSystemJobs: true}
		if c.opt.Timing.ForceOnTimeout {
			// Nomad force-stops what is left at the deadline (drainer deadline
			// handling); with "abort" the coordinator cancels instead, so Nomad
			// gets no deadline and never kills what has not migrated.
			spec.Deadline = c.opt.Timing.DrainDeadline
		}
		opts := &api.DrainOptions{DrainSpec: spec, MarkEligible: false, Meta: map[string]string{
			metaGrant:   p.GrantID,
			metaBy:      "rollboot",
			metaMessage: "rollboot: reboot of " + p.Host + " (" + p.Reason + ")",
		}}
		if _, err := c.opt.Nodes.UpdateDrainOpts(in.Node.ID, opts, w); err != nil {
			return fmt.Errorf("drain node %s: %w", in.Node.ID, err)
		}
		log.Info("drain started", "node_id", in.Node.ID, "grant", p.GrantID)
	}
	if d.ClearRelease {
		// After the plan: a release is forgotten only once it is carried out.
		if err := c.clearControl(ctx, p.Host, false, true); err != nil {
			return err
		}
	}
	return nil
}

// clearControl removes a host's manual request and/or release from the control
// variable.
func (c *Coordinator) clearControl(ctx context.Context, host string, request, release bool) error {
	_, err := c.opt.Store.UpdateControl(ctx, func(ctl *store.Control) error {
		if request {
			delete(ctl.Requests, host)
		}
		if release {
			delete(ctl.Releases, host)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update control: %w", err)
	}
	return nil
}

// clusterCache reads each server cluster's health at most once per pass.
func (c *Coordinator) clusterCache() func(ctx context.Context, product, cluster string) health.ClusterHealth {
	seen := map[string]health.ClusterHealth{}
	return func(ctx context.Context, product, cluster string) health.ClusterHealth {
		k := product + "/" + cluster
		if h, ok := seen[k]; ok {
			return h
		}
		h := c.opt.Clusters.Read(ctx, product, cluster)
		seen[k] = h
		return h
	}
}

type clusterReader = func(ctx context.Context, product, cluster string) health.ClusterHealth

// serverGate says why a host that runs servers may not be taken out now ("" if it
// may): at most one server of each cluster out at once (its quorum group has a
// concurrency of 1), and each cluster healthy and able to lose this server.
func (c *Coordinator) serverGate(ctx context.Context, read clusterReader, rec *store.HostRecord, out map[string]string, sealed []string) string {
	if why := discoveryHold(rec); why != "" {
		return why
	}
	if rec == nil || len(rec.Servers) == 0 {
		if rec != nil && serverRole(rec.Roles) != "" {
			return "the host runs a " + serverRole(rec.Roles) + " whose Raft ID is unknown: its quorum gate stays closed"
		}
		return ""
	}
	if c.opt.Clusters == nil {
		return "the host runs servers and no quorum gates are configured"
	}
	for _, srv := range rec.Servers {
		if other, ok := out[srv.Product+"/"+srv.Cluster]; ok && other != rec.Host {
			return fmt.Sprintf("%s server of %s on %s is already out: one at a time", srv.Product, srv.Cluster, other)
		}
		if srv.Product == "vault" {
			for _, h := range sealed {
				if h != rec.Host {
					return "quorum gate: Vault on " + h + " is sealed: an unseal is needed first"
				}
			}
		}
	}
	for _, srv := range rec.Servers {
		if ok, why := health.PreRebootGate(read(ctx, srv.Product, srv.Cluster), srv.ID); !ok {
			return "quorum gate: " + why
		}
	}
	return ""
}

// discoveryHold says why a host whose agent cannot tell which servers run on it
// is held ("" when it can): its record may lack a server, and taking it out then
// would skip that server's quorum gate.
func discoveryHold(rec *store.HostRecord) string {
	if rec == nil || rec.DiscoverError == "" {
		return ""
	}
	return "server roles unknown (the agent keeps retrying): " + rec.DiscoverError
}

// leads returns the products whose leader runs on the host, and why their
// hand-over is blocked (refused, with the "hold" policy).
func (c *Coordinator) leads(ctx context.Context, read clusterReader, rec *store.HostRecord) ([]string, string) {
	var out []string
	blocked := ""
	for _, srv := range rec.Servers {
		if !health.NeedsHandOver(read(ctx, srv.Product, srv.Cluster), srv.ID) {
			continue
		}
		c.mu.Lock()
		refused, denied := c.noHandOver[rec.Host+"/"+srv.Product]
		c.mu.Unlock()
		switch {
		case denied && c.opt.HoldOnDeniedHandOver:
			blocked = "leadership hand-over refused (policy: hold): " + refused
			out = append(out, srv.Product)
		case denied:
			// policy continue: the host reboots as leader
		default:
			out = append(out, srv.Product)
		}
	}
	return out, blocked
}

// postGate says why the host's servers are not back in their clusters ("" when
// they are): a Raft member again, healthy, stable, and Vault unsealed.
func (c *Coordinator) postGate(ctx context.Context, read clusterReader, rec *store.HostRecord, now time.Time) string {
	if why := discoveryHold(rec); why != "" {
		return why
	}
	if rec.VaultSealed {
		return "Vault on " + rec.Host + " is sealed: an unseal is needed"
	}
	for _, srv := range rec.Servers {
		if ok, why := health.PostRebootGate(read(ctx, srv.Product, srv.Cluster), srv.ID, now, c.opt.ServerStableFor); !ok {
			return why
		}
	}
	return ""
}

// handOver hands the leadership of product over from the host's server. Without
// the permission to (Nomad's needs a management token) it says so once and lets
// the host go: the cluster elects a new leader when the host goes down.
func (c *Coordinator) handOver(ctx context.Context, rec *store.HostRecord, product string) error {
	if rec == nil {
		return nil
	}
	for _, srv := range rec.Servers {
		if srv.Product != product {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.opt.Clusters.HandOver(hctx, product, srv.ID)
		cancel()
		if errors.Is(err, health.ErrDenied) {
			if c.opt.HoldOnDeniedHandOver {
				c.log.Error("leadership hand-over refused; holding the host (policy: hold)",
					"host", rec.Host, "product", product, "err", err)
			} else {
				c.log.Error("leadership hand-over refused; the host reboots as leader and the cluster elects another (policy: continue)",
					"host", rec.Host, "product", product, "err", err)
			}
			c.mu.Lock()
			if c.noHandOver == nil {
				c.noHandOver = map[string]string{}
			}
			c.noHandOver[rec.Host+"/"+product] = err.Error()
			c.mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("hand over %s leadership from %s: %w", product, rec.Host, err)
		}
		c.log.Info("leadership handed over", "host", rec.Host, "product", product)
	}
	return nil
}

func newGrantID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

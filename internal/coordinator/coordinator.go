// Package coordinator runs rollboot's policy brain: a level-triggered reconcile loop
// whose every pass observes (observe.go: the hosts' records, the Nomad nodes, its own
// plans, the server clusters' health, into a snapshot), admits (admit.go: the group
// budgets of package policy and rollboot's own rules, pure), decides with the pure
// phase machine (package phase) and applies idempotent steps to Nomad in a
// crash-safe order (apply.go). A coordinator killed at any instant and
// replaced by another continues from what is stored. It holds the loop only:
// what is not the loop is in the packages it calls (docs/architecture.md).
package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/allocsource"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/capacityread"
	"github.com/rollboot/rollboot/internal/copykeep"
	"github.com/rollboot/rollboot/internal/enforcement"
	"github.com/rollboot/rollboot/internal/gatepoll"
	"github.com/rollboot/rollboot/internal/haltkeep"
	"github.com/rollboot/rollboot/internal/handover"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/loopmetrics"
	"github.com/rollboot/rollboot/internal/membership"
	"github.com/rollboot/rollboot/internal/nodegroups"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/optout"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/recordcheck"
	"github.com/rollboot/rollboot/internal/rejoinwatch"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/sideoutput"
	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/stopjobs"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watch"
	"github.com/rollboot/rollboot/internal/watched"
	"github.com/rollboot/rollboot/internal/wavekeep"
	"github.com/rollboot/rollboot/internal/workloadread"
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

// Options configure a coordinator: what it talks to, the rollout rules it
// starts with, and how its loop runs.
type Options struct {
	Deps
	rules.Rules
	Runtime
}

// Deps are the APIs a coordinator talks to. Nodes and Store are required;
// each of the others, when nil, turns off what it serves.
type Deps struct {
	Nodes NodesAPI
	Store *store.Store
	// Clusters gives the server quorum gates their view of the server clusters.
	// Without it, hosts that run servers are never granted.
	Clusters ClusterAccess
	// Jobs tells which hosts lost their agent from the allocations of
	// Runtime.AgentJob (caches.go).
	Jobs hostcheck.JobsAPI
	// Policy is the stored policy: its rules replace Options.Rules, which hold
	// the safe default until it is read (policy.go).
	Policy PolicySource
	// Notifier sends the rollout's notifications while this coordinator leads
	// (sideoutputs.go).
	Notifier sideoutput.Notifier
	// NodeMeta publishes each host's state as dynamic node metadata while this
	// coordinator leads (sideoutputs.go).
	NodeMeta sideoutput.MetaPublisher
	// Silencer keeps the Alertmanager silences of the hosts out for their
	// reboot while this coordinator leads (sideoutputs.go).
	Silencer sideoutput.Silencer
	// AlertReader reads the alerts (nil: over HTTP, package alertread).
	AlertReader gatepoll.AlertReader
	// GateReader reads the health gates (nil: over HTTP alone, package
	// gateread: consul_service and nomad_job gates stay closed).
	GateReader gatepoll.HealthGateReader
	// ApprovalAsker asks the approval webhook (nil: over HTTP, package
	// approvalhook, as the policy's approval block says).
	ApprovalAsker approvalhook.Asker
	// WorkloadsAPI is what the workload blockers read (nil: none is checked).
	WorkloadsAPI workloadread.API
	// Allocs stops the allocations of drain.stop_jobs (package stopjobs);
	// ConsulHealth reads the checks of healthy.consul_checks (rejoinhealth.go).
	Allocs       stopjobs.Allocs
	ConsulHealth ConsulHealthAPI
	// NodeEvents keeps the node list current from Nomad's event stream instead
	// of a blocking query of the whole list (nodes.go).
	NodeEvents nodestream.NodeEventsAPI
}

// Runtime is how a coordinator's loop runs and names itself.
type Runtime struct {
	// Resync is the period of a full reconcile even without any change seen.
	Resync time.Duration
	// StepTimeout bounds each step of a pass: reading the snapshot, and carrying
	// out one host's decision (0: DefaultStepTimeout). See apply.go.
	StepTimeout time.Duration
	// Registry receives the coordinator's metrics (nil: a registry of its own,
	// see Registry). Coordinators built again on the same registry share them.
	Registry *prometheus.Registry
	Log      *slog.Logger
	Now      func() time.Time // default time.Now
	// Identity names this coordinator in the enforcement record `rollboot
	// status` shows (host name and process).
	Identity string
	// AgentJob (default "rollboot") in AgentJobNamespace is the agent's job,
	// whose allocations tell which hosts lost their agent (Deps.Jobs).
	AgentJob          string
	AgentJobNamespace string
	// FleetLockIDs are the FleetLock ids on the operator's allow-list: a host
	// without a Nomad node whose record publishes one may take part
	// (package hostcheck).
	FleetLockIDs []string
}

// Coordinator is one coordinator instance. Only the elected one runs Run.
// Its state is the pass goroutine's, but for the mailbox the watches write to
// and what mu guards (mailbox.go, "Who owns what").
type Coordinator struct {
	opt Options
	log *slog.Logger
	now func() time.Time

	// mu guards what the steps of a pass that run side by side write (the
	// plan writes, apply.go) and what callers read while Run runs: the
	// fields below up to ignored.
	mu    sync.Mutex
	plans map[string]store.Plan // our own writes; loaded on start
	// plansGen counts the changes of plans (a write, a load): what was handed
	// on after a pass is handed on again only when it moved (sideoutputs.go).
	plansGen uint64
	// changed: a pass applied a change (wake.go: the next pass runs at once).
	changed bool
	// recheck: the earliest RecheckAt of the pass's decisions (wake.go runs
	// the next pass then; zero: none).
	recheck time.Time
	ignored []store.BadRecord // the records the last pass dropped

	// mail: the watches' newest answers (mailbox.go); seen: as the pass took
	// them at its start (takeMail).
	mail mailbox
	seen answers
	// nodeFollower: the node list's follower of this term (nil: the node
	// watch runs instead); the loop tells it which nodes to follow one by one.
	// suspected: when a pass last found its stream behind a write of ours
	// (zero: not since it caught up; nodes.go nodeList).
	nodeFollower *nodestream.Follower
	suspected    time.Time
	// nodesAtLeast: the index a node list must be at to be used (nodes.go):
	// that of the coordinator's last node write (a drain, an eligibility
	// change), or of the last list a pass read itself; atomic: the plan writes
	// that give nodes back run side by side.
	nodesAtLeast atomic.Uint64

	// Everything below is the pass goroutine's.

	// allocs: where the pass finds the allocations of nodes: a watch's newest
	// answer (OnNode), else the pass's own read, kept for the watches started
	// after it (package allocsource; its lock: reads go side by side).
	allocs allocsource.Source

	// noHandOver: hand-overs refused for lack of permission, by host/product,
	// with the refusal (a hand-over runs only in the decisions a pass carries
	// out one after the other).
	noHandOver map[string]string
	// members: the server clusters' memberships the records are
	// corroborated with; records: their checks (package recordcheck).
	members membership.Reader
	records recordcheck.Checker
	// hostsAtLeast: the index of the last list of the host records that a
	// pass read itself: a watch's answer older than it (its first, racing
	// with such a pass) is not used (caches.go).
	hostsAtLeast uint64
	// groups: the nodes' groups as last asked of Nomad (nodes.go).
	groups nodegroups.Asker
	// optOut: the pending nodes' node meta opt-outs as last asked (nodes.go).
	optOut optout.Asker
	// capacity: the capacity gate's reads, which keep each node's capacity
	// and a draining node's movers by its ModifyIndex (admitreads.go).
	capacity capacityread.Reader
	// heartbeats: the heartbeat indexes of the nodes of hosts that should be
	// rebooting (caches.go).
	heartbeats byindex.Cache[heartbeatIndexes]
	// streamed: the heartbeat indexes of every node the node follower saw in
	// full this term, by ModifyIndex (mailbox.go nodeEvents; caches.go).
	streamed byindex.Cache[heartbeatIndexes]
	// controlRead: the control state as the last pass read it, while its
	// watches see no change (caches.go).
	controlRead watched.Kept[store.Control]
	// side: the notifier, the node metadata publisher and the silence keeper,
	// with what each was last handed (package sideoutput).
	side sideoutput.Outputs
	// deployments: the deployments this term follows (nil: read by passes).
	deployments *workloadread.Deployments
	// historyWritten: a history record was written since the last prune
	// (apply.go closeCycle, set by the pass's writes side by side).
	historyWritten atomic.Bool

	metrics *loopmetrics.Metrics
	// passes: the passes' durations and overruns (what callers read while
	// Run runs: Overruns).
	passes *loopmetrics.Passes
	// handOffs: the slots freed, until their group's next drain starts
	// (the slot hand-off metric; its own lock: the plan writes run side by
	// side).
	handOffs *statemetrics.HandOffs
	// stateHosts: the array of the last state handed to the state metrics
	// (sideoutputs.go), reused by the next.
	stateHosts []statemetrics.Host
	// policy: the stored policy as the last pass read it (policy.go).
	policy policyState
	// admitRecheck: when admission may decide otherwise with nothing else
	// changing (a group done settling, a capacity or workload hold to look at
	// again: admission.Result.RecheckAt); wake.go runs a pass then.
	admitRecheck time.Time
	// capacityHolds: the capacity gate's holds the last admission kept
	// (admission.Result.CapacityHolds), which stand without a read while the
	// nodes they depend on are laid out the same.
	capacityHolds map[string]admission.CapacityHold
	// freezeRecheck: when a freeze of the policy next starts or ends
	// (policy.NextFreezeChange): a pass runs then, so that the notifier is
	// handed the freezes in force at once, also with no host queued.
	freezeRecheck time.Time
	// alerts and gates: the alert gate's and the health gates' state (package gatepoll).
	alerts *gatepoll.Alerts
	gates  *gatepoll.Gates
	// approvals: the approval webhook's answers (holds.go).
	approvals *approvalhook.Keeper
	// halts: the failure budgets' halt state across passes (package haltkeep).
	halts *haltkeep.Keeper
	// checkNodes: the Consul nodes whose checks the last pass read for a host
	// waiting for them (rejoinhealth.go); watched until it ends (wake.go).
	checkNodes map[string]bool
	// waves: <prefix>/waves as this term read and wrote it (package
	// wavekeep).
	waves *wavekeep.Keeper
	// beforeChecks: the hosts under way whose rejoin had not come to the
	// checks of their node's allocations as the last pass found them: their
	// agent had not reported the reboot (phase.AwaitsReport), or their node
	// was not ready (the rejoin waits for it first). Their allocations are
	// not watched (rejoinwatch.AllocNodes) before: the node's readiness comes
	// with the node list, and the agent's report with its record.
	beforeChecks map[string]bool
	// copies: the copies of the plans and host records, loaded by a term's
	// first pass and written after passes (package copykeep).
	copies copykeep.Keeper
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
	c.opt.Rules.SetDefaults()
	if c.opt.Resync <= 0 {
		c.opt.Resync = 30 * time.Second
	}
	if c.opt.Store != nil {
		c.opt.Store.KeepCopies() // package copykeep
	}
	c.metrics = loopmetrics.New(c.opt.Registry)
	c.handOffs = statemetrics.NewHandOffs(c.metrics.State)
	c.passes = loopmetrics.NewPasses(c.metrics)
	c.members = membership.Reader{Clusters: opt.Clusters, MaxAge: min(membership.MaxAge, c.opt.Resync), Now: c.now}
	c.records = recordcheck.Checker{Members: &c.members, Reporter: membership.Reporter{Log: c.log}, Jobs: c.opt.Jobs,
		AgentJob: c.agentJob(), Namespace: c.opt.AgentJobNamespace, Unbacked: c.metrics.State.Unbacked, Log: c.log, Now: c.now}
	if c.opt.Nodes != nil {
		c.opt.Nodes = writeIndexNodes{NodesAPI: c.opt.Nodes, atLeast: &c.nodesAtLeast}
	}
	c.copies = copykeep.Keeper{Store: c.opt.Store, Log: c.log}
	c.policy.keep.Log = c.log
	c.policy.record = enforcement.Publisher{Store: c.opt.Store, Leader: opt.Identity, Now: c.now, Log: c.log}
	c.side = sideoutput.Outputs{Notifier: opt.Notifier, NodeMeta: opt.NodeMeta, Silencer: opt.Silencer}
	c.allocs.Nodes = c.opt.Nodes
	c.capacity = capacityread.Reader{Nodes: c.opt.Nodes, AllocsRead: c.allocs.Noted, InPass: c.allocs.InPass}
	c.alerts = gatepoll.NewAlerts(opt.AlertReader, c.metrics.Registry, c.log)
	c.gates = gatepoll.NewGates(opt.GateReader, c.metrics.Registry, c.log)
	c.approvals = approvalhook.NewKeeper(opt.ApprovalAsker, c.metrics.Registry, c.log)
	c.waves = wavekeep.New(c.opt.Store, c.metrics.Registry, c.log)
	c.halts = haltkeep.New(c.opt.Store, c.metrics.Registry, c.log)
	return c
}

// Run reconciles whenever the host records, the control variable or the Nomad
// nodes change, again at once after a pass that changed something, when a timer
// of a decision runs out, and at least every Resync, until ctx ends (wake.go).
func (c *Coordinator) Run(ctx context.Context) error {
	c.metrics.State.Lead(true)
	defer c.metrics.State.Lead(false)
	defer c.endTerm()
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
	c.groups = nodegroups.Asker{} // another coordinator may have written since we last led
	c.nodesAtLeast.Store(0)
	c.hostsAtLeast = 0
	c.records.NewTerm()
	c.startWatches(ctx, &wg, poke) // a new term of the mailbox: no watch has answered yet
	c.side.Start(ctx, &wg)
	defer c.copies.Start(ctx, &wg)()
	allocs := rejoinwatch.NewAllocs(ctx, c.opt.Nodes, &c.mail, poke) // what rejoining hosts wait on
	defer allocs.Stop()
	checks := rejoinwatch.NewChecks(ctx, c.opt.ConsulHealth, poke)
	defer checks.Stop()

	c.mu.Lock()
	c.plans = nil // reload: another coordinator may have written since we last led
	c.mu.Unlock()
	c.handOffs.Forget()
	t := time.NewTicker(c.opt.Resync)
	defer t.Stop()
	chained, failed := 0, 0
	for {
		c.mu.Lock()
		c.changed, c.recheck = false, time.Time{}
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
		changed, plans := c.changed, plansUnderWay(c.plans) // observe.go
		c.mu.Unlock()
		allocs.Set(rejoinwatch.AllocNodes(plans, c.beforeChecks), c.allocs.TakeReads())
		checks.Set(maps.Clone(c.checkNodes))
		if c.nodeFollower != nil {
			c.nodeFollower.Watch(cycleNodes(plans)) // followed one by one without the stream (nodes.go)
		}
		// A failed pass is not chained: the next would fail the same way
		// (waitForPass backs off).
		again, spinning := afterPass(changed && err == nil, chained, len(kick) > 0)
		if again {
			chained++
			continue
		}
		if spinning {
			c.metrics.Spins.Inc()
			c.log.Warn("decisions kept changing with nothing else changing: waiting for a change, a timer or the resync before the next pass",
				"passes", chained+1)
		}
		chained = 0
		if !c.waitForPass(ctx, kick, t.C, failed) {
			return nil
		}
	}
}

// startWatches starts a term of the mailbox, and a blocking-query loop that
// leaves its answers there and pokes the reconcile loop on every change of the
// host records, the nodes, the control variable, the requests, (when checked)
// the agent job's allocations and the stored policy. They end with ctx; wg
// waits for them.
func (c *Coordinator) startWatches(ctx context.Context, wg *sync.WaitGroup, poke func()) {
	c.mail.start(ctx)
	queries := []watch.Query{c.watchVars, c.watchControl, c.watchRequests}
	if c.opt.NodeEvents != nil {
		f := c.newNodeFollower(poke) // nodes.go
		c.nodeFollower = f
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Run(ctx)
		}()
	} else {
		queries = append(queries, c.watchNodes)
	}
	if c.agentJob() != "" {
		queries = append(queries, c.watchAgentJob)
	}
	if c.opt.Policy != nil {
		queries = append(queries, c.watchPolicy)
	}
	queries = append(queries, c.watchHalts) // caches.go
	c.deployments = nil
	if c.opt.WorkloadsAPI != nil && c.opt.Workloads.Deployments {
		d := &workloadread.Deployments{} // taken by the passes of this term (admitreads.go)
		c.deployments = d
		wg.Go(func() { d.Follow(ctx, c.opt.WorkloadsAPI, poke) })
	}
	for _, q := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watch.Loop{Query: q, OnChange: func(uint64) { poke() }}.Run(ctx)
		}()
	}
}

func (c *Coordinator) watchVars(ctx context.Context, idx uint64) (uint64, error) {
	if !c.mail.hostsTaken(ctx) {
		// List again once a pass took the last list (caches.go); the
		// change that made it was told (poked) when it was answered.
		return idx, ctx.Err()
	}
	list, n, err := c.opt.Store.HostList(ctx, idx, 5*time.Minute)
	if err != nil {
		c.mail.hostsFailed() // passes read the records themselves
		return n, err
	}
	c.mail.hostsAnswered(n, list, n != idx) // the next pass reads what it shows changed (caches.go)
	return n, nil
}

func (c *Coordinator) watchNodes(ctx context.Context, idx uint64) (uint64, error) {
	q := (&api.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
	list, meta, err := c.opt.Nodes.List(q)
	if err != nil {
		c.mail.setNodes(nil, 0) // not known to be current: passes read it
		return 0, err
	}
	c.mail.setNodes(list, meta.LastIndex) // the next pass takes it (nodes.go)
	return meta.LastIndex, nil
}

// ReconcileOnce runs one pass: observe (read everything into a snapshot), admit
// (which pending hosts get a slot), then for every host phase.Step (the phase machine)
// and apply (the writes, in their crash-safe order).
func (c *Coordinator) ReconcileOnce(ctx context.Context) error {
	c.takeMail()
	octx, cancel := c.stepContext(ctx)
	defer cancel()
	if err := c.refreshPolicy(octx); err != nil {
		return c.stepFailed(octx, ctx, err)
	}
	s, err := c.observe(octx)
	if err != nil {
		return c.stepFailed(octx, ctx, err)
	}
	c.approvals.ForgetSettled(s.plans) // holds.go
	c.halts.Log(haltkeep.Pass{State: s.halts, Index: s.haltsIndex, Err: s.haltsErr})
	c.storeWaves(octx, s) // a canary's failure, before any grant (holds.go)
	adm := c.grantWaves(octx, s, c.admit(octx, s))
	c.admitRecheck = adm.RecheckAt
	c.freezeRecheck = policy.NextFreezeChange(c.opt.Rules.AllGroups(), s.now)
	c.exportState(s)
	c.publishSlots(octx, s.statuses)
	c.notifyPass(s.control, s.now) // the plans as read: another leader may have stored them
	var errs error
	var r routed
	var failing []pendingWrite // decisions that fail a cycle, carried out once recorded (apply.go recordFailures)
	waiting := map[phase.WaitKind]int{}
	for _, name := range s.names {
		hv := s.hosts[name]
		if err := hv.err; err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		if nothingToDecide(s, hv, name, planUnderWay(s.plans[name]), c.opt.Rules.Options(hv.group).MaxUptime) {
			waiting[phase.NotWaiting]++ // phase.Step's decision for it (observe.go)
			continue
		}
		in := c.input(s, adm, name)
		d := phase.Step(in)
		c.noteRecheck(d)
		waiting[d.Waiting.Kind]++
		if !d.Acts() {
			continue // nothing to carry out (apply.go)
		}
		if d.Failure != "" {
			failing = append(failing, pendingWrite{in: in, d: d})
			continue
		}
		r.route(s, in, d)
	}
	recorded, err := c.recordFailures(ctx, s, failing) // before their plans (apply.go)
	errs = errors.Join(errs, err)
	for _, w := range recorded {
		r.route(s, w.in, w.d)
	}
	for _, w := range cordonsFirst(r.apart) {
		errs = errors.Join(errs, c.carryOutBounded(ctx, w.in, w.d))
	}
	first, rest, heads := headsFirst(s, r.writes) // regrant.go
	// The slots freed, handed out at once (regrant.go).
	granted, err := c.storeAndHandOut(ctx, s, adm, r, first, heads, errs == nil)
	errs = errors.Join(errs, err)
	errs = errors.Join(errs, c.storePlans(ctx, append(notGranted(heads, granted), rest...), PlanWriteParallelism))
	errs = errors.Join(errs, c.pruneHistory(ctx))
	c.metrics.State.Waiting(waiting)
	c.notifyPass(s.control, s.now)
	c.publishMeta(s)
	c.silencePass()
	c.copies.After(ctx)
	return errs
}

// cordonsFirst orders the decisions a pass carries out one after the other:
// the cordons of the hosts next in line first, then the rest (drains among
// them) in host order. A drain's allocations are placed as soon as it starts,
// so a cordon carried out after it could come too late for them.
func cordonsFirst(ws []pendingWrite) []pendingWrite {
	out := make([]pendingWrite, 0, len(ws))
	for _, w := range ws {
		if w.d.Cordon {
			out = append(out, w)
		}
	}
	for _, w := range ws {
		if !w.d.Cordon {
			out = append(out, w)
		}
	}
	return out
}

// routed is where a pass's decisions go: carried out one after the other,
// first (cordonsFirst); stored together after them (apply.go); and the hosts
// whose decision frees their slot or makes them pending (regrant.go).
type routed struct {
	apart, writes []pendingWrite
	freed, pended []string
}

// route keeps d, one host's decision, in r: to be carried out apart or stored
// with the others; it notes the slot it frees or the host it makes pending.
func (r *routed) route(s *snapshot, in phase.Input, d phase.Decision) {
	name := in.Plan.Host
	if d.FreesSlot(in) {
		r.freed = append(r.freed, name)
	}
	if d.BecomesPending(in) {
		r.pended = append(r.pended, name)
	}
	if !d.StoredTogether() {
		r.apart = append(r.apart, pendingWrite{in: in, d: d})
		return
	}
	w := pendingWrite{in: in, d: d}
	if phase.EligibleAgain(in, d) {
		w.rejoin = s                    // the cycle may close in this pass (apply.go)
		r.freed = append(r.freed, name) // regrantFreed counts it once its close is stored
	}
	r.writes = append(r.writes, w)
}

// input is what the phase machine sees of one host in this pass.
func (c *Coordinator) input(s *snapshot, adm admission.Result, name string) phase.Input {
	hv, ctl := s.hosts[name], s.control
	p := s.plans[name]
	if p.Host == "" {
		p = store.Plan{Host: name, Phase: store.PhaseIdle}
	}
	in := phase.Input{
		Now: s.now, Plan: p, Host: hv.rec, Node: hv.node, Group: hv.group, Paused: ctl.Paused,
		CancelAt: ctl.Cancels[name], ReleaseAt: ctl.Releases[name],
		Admitted: adm.Admitted[name], NotAdmitted: adm.Wait[name], Timing: c.opt.Timing, Clusters: s.clusters,
		NodeGone: s.nodeGone(p), Cordon: adm.Cordon[name], NoCordon: adm.NoCordon[name],
	}
	if _, ok := ctl.Requests[name]; ok {
		r := ctl.Requests[name] // declared here: a variable whose address is taken is allocated, for every host
		in.Request = &r
	}
	c.withGroupOptions(s, name, &in)
	if hv.rec != nil && c.opt.Clusters != nil {
		in.ServerGates = true
		switch p.Phase {
		case store.PhasePending, store.PhaseDraining:
			in.Leads, in.HandOverBlocked = leads(s.clusters, hv.rec, s.noHandOver, c.opt.HoldOnDeniedHandOver)
		case store.PhaseRejoining, store.PhaseStuck, store.PhaseRebooting, store.PhaseDrained:
			// The rejoin's gate, also for the phases whose decision may enter
			// the rejoin: the pass may close it once eligibility is back
			// (apply.go).
			in.PostGate, in.PostGateRecheck = postGate(s.clusters, hv.rec, s.now, c.opt.ServerStableFor)
		}
	}
	if in.Admitted {
		in.NewGrantID = newGrantID()
		in.SystemJobs = hv.jobs
		a := adm.Approved[name]
		in.ApprovedBy, in.ApprovalUntil = a.By, a.Until
	}
	return in
}

// carryOut applies one host's decision, then forgets a cancel it carried out.
func (c *Coordinator) carryOut(ctx context.Context, in phase.Input, d phase.Decision) error {
	if err := c.apply(ctx, in, d); err != nil {
		return fmt.Errorf("host %s: %w", in.Plan.Host, err)
	}
	var err error
	if d.ClearCancel {
		err = c.clearCancel(ctx, in.Plan.Host, in.CancelAt)
	}
	if d.Changes() {
		c.mu.Lock()
		c.changed = true
		c.mu.Unlock()
	}
	return err
}

// noteRecheck keeps the earliest time at which a decision of the pass asks to
// be made again (wake.go waits for it).
func (c *Coordinator) noteRecheck(d phase.Decision) {
	c.mu.Lock()
	c.recheck = phase.Earliest(c.recheck, d.RecheckAt)
	c.mu.Unlock()
}

// handOver hands the leadership of product over from the host's server
// (package handover). A refusal for lack of permission lets the host go, or
// holds it (HoldOnDeniedHandOver), and is kept for the next passes.
func (c *Coordinator) handOver(ctx context.Context, rec *store.HostRecord, product string) error {
	denied, err := handover.FromHost(ctx, c.opt.Clusters, rec, product, c.opt.HoldOnDeniedHandOver, c.log)
	if denied != "" {
		if c.noHandOver == nil {
			c.noHandOver = map[string]string{}
		}
		c.noHandOver[rec.Host+"/"+product] = denied
	}
	return err
}

func newGrantID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CountCandidates counts the hosts whose agent stands for election (their
// record has the coordinator-candidate role), from the host records as the
// passes read them: the census that quiet candidates divide their tries by
// (standby.go). Counting every host record instead would over-count where only
// some agents are candidates, and the quiet ones would try too seldom.
//
// It runs beside the loop (the election's census, while this coordinator
// leads): it peeks at the host watch's newest list in the mailbox and touches
// none of the pass's state.
func (c *Coordinator) CountCandidates(ctx context.Context) (int, error) {
	var w watched.Value[store.HostList]
	c.mail.Read(func(a *answers, _ bool) { w = a.hosts })
	var (
		recs []store.HostRecord
		err  error
	)
	if w.Live {
		recs, _, err = c.opt.Store.HostsIn(ctx, w.Val)
	} else {
		recs, _, _, err = c.opt.Store.HostsChecked(ctx, 0, 0)
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range recs {
		if isCandidate(&recs[i]) {
			n++
		}
	}
	return n, nil
}

// Follow starts the watches Run starts (the host records, the nodes, the
// control variable, the requests, the agent job, the stored policy) without
// Run's loop: passes made with ReconcileOnce then take what the watches read,
// as the passes of Run do, rather than reading it all themselves. It returns
// once the host record and node watches (and the policy's, when one is
// stored) have answered; stop ends the watches and waits for them. It serves
// to time passes as they run while leading (rollboot bench).
func (c *Coordinator) Follow(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c.startWatches(ctx, &wg, func() {})
	stop = func() {
		cancel()
		wg.Wait()
	}
	answered := func(a *answers, _ bool) bool { // the watches a pass takes its reads from
		return a.hosts.Live && a.nodes.Val != nil && (c.opt.Policy == nil || a.policy.Live)
	}
	if !c.mail.Wait(ctx, answered, 0) {
		stop()
		return nil, fmt.Errorf("the watches did not answer: %w", ctx.Err())
	}
	return stop, nil
}

// WatchedHosts returns the index the host record watch last answered at: a
// record written at or before it is read by the next pass.
func (c *Coordinator) WatchedHosts() uint64 {
	var idx uint64
	c.mail.Read(func(a *answers, _ bool) { idx = a.hosts.Index })
	return idx
}

// WatchedNodes returns the index of the node list the node watch last kept (0:
// none, or it failed), for a benchmark that waits until a change is seen.
func (c *Coordinator) WatchedNodes() uint64 {
	var idx uint64
	c.mail.Read(func(a *answers, _ bool) {
		if a.nodes.Val != nil {
			idx = a.nodes.Index
		}
	})
	return idx
}

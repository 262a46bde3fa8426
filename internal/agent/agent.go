package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/version"
	"github.com/rollboot/rollboot/internal/watch"
)

// HealthAPI is the local Nomad agent's GET /v1/agent/health, which says whether
// it runs a client, a server or both, and which Nomad answers with no ACL
// check; *api.Agent implements it.
type HealthAPI interface {
	Health() (*api.AgentHealthResponse, error)
}

// ServerProbe asks the host's local Consul and Vault (and Nomad) agents which
// servers run here, and acts on the local Consul agent.
type ServerProbe interface {
	// Discover returns the host's roles and its servers. self is what the
	// host's local Nomad agent runs, as the agent asked it (Identity) just
	// before: not asked again.
	Discover(ctx context.Context, self discovery.NomadSelf) (roles []string, servers []store.Server, err error)
	// VaultSealed reports whether the local Vault server is sealed.
	VaultSealed(ctx context.Context) (bool, error)
	// ConsulMaintenance puts the local Consul node in maintenance mode, or takes
	// it out.
	ConsulMaintenance(ctx context.Context, enable bool, reason string) error
}

// Options configure an agent.
type Options struct {
	Host       string // the host's name in rollboot (default: the hostname)
	Candidate  bool   // a coordinator candidate runs beside the agent
	Hostname   string
	Store      *store.Store
	BootIDFile string
	// RecordFile keeps, across the reboot, the last record the agent wrote
	// (recordfile.go); "" keeps none: the record is read at every start.
	RecordFile string
	// WatchWait is how long each blocking query of the agent's watches (its
	// plan, its record) waits for a change; default, and Nomad's cap,
	// watch.MaxWait.
	WatchWait time.Duration
	// BootTimeFile is the kernel's /proc/stat, whose btime line is the boot
	// time published for max_uptime; "" publishes none.
	BootTimeFile string
	FleetLockID  string

	// Local is the host's own Nomad agent, NodeList the cluster's nodes: who
	// the host is in Nomad (Identity).
	Local    HealthAPI
	NodeList discovery.NodeLister
	// NomadVersion, when set, checks the local Nomad's version once the host
	// is identified: its client's, as its node lists it, or "" on a host
	// without a client. An error stops the agent.
	NomadVersion func(clientVersion string) error

	// Servers, when set, discovers the Nomad, Consul and Vault servers on the host
	// (roles come from the local Nomad agent alone otherwise).
	Servers ServerProbe

	Detectors   []Detector
	PollEvery   time.Duration // how often cheap detectors (the sentinel file) run; default 500ms
	SlowEvery   time.Duration // how often slow detectors (a command) run; default 5m
	SlowIndexes []int         // indexes in Detectors that are slow
	// NotifiedPollEvery replaces PollEvery when every cheap detector tells of
	// its changes (Notifier): a look in case a notification was lost; default
	// 10s. Looking every PollEvery regardless was most of an idle agent's CPU
	// (a wake of the process twice a second; docs/performance.md, "The agent's
	// memory", Idle CPU).
	NotifiedPollEvery time.Duration

	Rebooter    Rebooter
	RetryAfter  time.Duration // wait after an interrupted reboot attempt before trying again; default 10s
	Delay       time.Duration
	PreHooks    [][]string
	PostHooks   [][]string
	HookTimeout time.Duration
	// PassEnv names the secret-bearing environment variables hooks still get
	// (agent.pass_env); every other one is removed (cmdenv.go).
	PassEnv []string

	// BeforeReboot runs right before the reboot (the agent stops its coordinator
	// candidate there, releasing the lock at once); RebootFailed runs when the
	// reboot could not be started (the candidate stands again).
	BeforeReboot func()
	RebootFailed func()
	// Started runs once the agent has started: it knows its host and has
	// published the record of this boot (or scheduled its retry).
	Started func()

	// Nodes reads the host's node as Nomad reports it, for the final go/no-go;
	// Clusters reads the server clusters' health for a server host's pre-reboot
	// gate. Without Nodes the node is not checked; without Clusters a server host
	// never reboots.
	Nodes    NodeAPI
	Clusters ClusterReader
	// RecheckEvery is how often a held reboot checks its go/no-go again; default 5s.
	RecheckEvery time.Duration
	// AbsentPlanWait is the first wait of the plan's watch, while the host
	// has no plan, after Nomad answered it for a write near the plan's path;
	// it doubles at each such answer in a row up to 5 minutes, and starts over
	// when the agent writes its record (watchPlan). Default 1s.
	AbsentPlanWait time.Duration
	// DownTimeout is how long the host may take to go down after the reboot
	// method succeeded before the attempt counts as failed; default 5m.
	DownTimeout time.Duration
	// AgentJob is the Nomad system job the agent runs as ("<namespace>/<job>").
	AgentJob string

	// ServerLocks takes, renews and releases the reboot lock of each server
	// cluster of the host (serverlock.go); *api.Variables implements it.
	// Namespace is the namespace of rollboot's variables (the Store's).
	// ServerLockFile keeps the IDs of the locks held across the reboot. Without
	// ServerLocks or ServerLockFile a server host never reboots.
	ServerLocks    LockVariables
	Namespace      string
	ServerLockFile string
	// ServerLockTTL is the TTL of a server reboot lock; default 15m. Nomad
	// frees a lock 2×TTL (plus its lock delay) after its last renewal.
	ServerLockTTL time.Duration
	// ServerStableFor is how long a server must have been stable after the
	// reboot before its cluster's lock is released; default 0: once it is
	// healthy, a voter and in its cluster's configuration again. The lock
	// keeps a second server from going down while the first is not back; how
	// long a server must be stable before its host's slot is freed is the
	// coordinator's server_stable_for (its post-reboot gate), and the next
	// server's own pre-reboot gate needs every other server healthy.
	ServerStableFor time.Duration

	Log *slog.Logger
	Now func() time.Time
}

// Agent is a running agent.
type Agent struct {
	opt Options
	log *slog.Logger
	now func() time.Time

	rec       store.HostRecord
	last      store.HostRecord // what was last written
	published bool
	conflicts int // the record's writes that lost their check-and-set
	// recordFileErr: the last failure to keep the record file, logged once.
	recordFileErr string
	// fileIndex: the index of the record the start took from the record
	// file (0: none).
	fileIndex uint64
	// planFrom is where the plan's watch starts (planWatchFrom): 0, or the
	// index of the start's write of a boot no record named before.
	planFrom uint64
	detected []detection // last answer of each detector
	pubFails int         // consecutive failed publishes
	pubNext  time.Time   // no publish before this (backoff after failures)

	// changes are the versions of the own record its watch saw: the loop
	// restores the record from them, and so does a reboot attempt while it
	// waits (a hold, the delay), since the loop does not run meanwhile.
	changes <-chan recordChange
	locks   lockState      // the server reboot locks (serverlock.go)
	bg      sync.WaitGroup // goroutines beside the loop: the release of server locks
	// maintenance: the Consul node was put in maintenance for the attempt under
	// way; a failed attempt takes it out again.
	maintenance bool
	// withdrawn: the last grant whose attempt ended because the stored plan
	// no longer granted it; the loop does not try it again (its plan may
	// still be the newest the watch gave).
	withdrawn string
	// planResume: the loop is done with a plan that grants this boot's reboot
	// (watchPlan holds its next query until then).
	planResume chan struct{}
	// recordWrites counts the agent's writes of its record, and planExpected
	// tells of each: a plan-less host's plan watch asks at once after one
	// (awaitPlan).
	recordWrites atomic.Uint64
	planExpected chan struct{}
	// guardHeld: the record's watch asks no more until guardResume
	// (holdGuard, guard.go).
	guardHeld   atomic.Bool
	guardResume chan struct{}
}

type detection struct {
	need  Need
	err   error
	known bool
}

// New returns an agent.
func New(opt Options) *Agent {
	a := &Agent{opt: opt, log: opt.Log, now: opt.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("host", opt.Host)
	if a.now == nil {
		a.now = time.Now
	}
	if a.opt.PollEvery <= 0 {
		a.opt.PollEvery = 500 * time.Millisecond
	}
	if a.opt.SlowEvery <= 0 {
		a.opt.SlowEvery = 5 * time.Minute
	}
	if a.opt.NotifiedPollEvery <= 0 {
		a.opt.NotifiedPollEvery = 10 * time.Second
	}
	if a.opt.RetryAfter <= 0 {
		a.opt.RetryAfter = 10 * time.Second
	}
	if a.opt.HookTimeout <= 0 {
		a.opt.HookTimeout = 5 * time.Minute
	}
	if a.opt.RecheckEvery <= 0 {
		a.opt.RecheckEvery = 5 * time.Second
	}
	if a.opt.AbsentPlanWait <= 0 {
		a.opt.AbsentPlanWait = time.Second
	}
	if a.opt.DownTimeout <= 0 {
		a.opt.DownTimeout = 5 * time.Minute
	}
	if a.opt.ServerLockTTL <= 0 {
		a.opt.ServerLockTTL = 15 * time.Minute
	}
	if a.opt.WatchWait <= 0 || a.opt.WatchWait > watch.MaxWait {
		a.opt.WatchWait = watch.MaxWait
	}
	a.detected = make([]detection, len(opt.Detectors))
	a.planResume = make(chan struct{}, 1)
	a.planExpected = make(chan struct{}, 1)
	a.guardResume = make(chan struct{}, 1)
	return a
}

// Identity tells who this host is in Nomad: whether its local agent runs a
// client and a server (GET /v1/agent/health: the keys "client" and "server",
// whatever their health), and, with a client, its node: the node of the host's
// name, as the cluster lists it (discovery.HostNode, node:read), never a node
// ID the host reports, and that node's Nomad version, its client's as Nomad
// lists it ("" without a client). A client whose node is not listed (yet) is
// an error: the caller tries again.
func Identity(ctx context.Context, local HealthAPI, nodes discovery.NodeLister, host string) (nodeID string, roles []string, nomadVersion string, err error) {
	h, err := local.Health()
	if err != nil {
		return "", nil, "", fmt.Errorf("local Nomad agent: %w", err)
	}
	if h.Client == nil && h.Server == nil {
		return "", nil, "", errors.New("local Nomad agent: its health names neither a client nor a server")
	}
	if h.Client != nil {
		n, err := discovery.HostNodeStub(ctx, nodes, host)
		if err != nil {
			return "", nil, "", err
		}
		if n == nil {
			return "", nil, "", fmt.Errorf("the local Nomad agent runs a client, but no Nomad node is named %q", host)
		}
		nodeID, nomadVersion = n.ID, n.Version
		roles = append(roles, store.RoleNomadClient)
	}
	if h.Server != nil {
		roles = append(roles, store.RoleNomadServer)
	}
	return nodeID, roles, nomadVersion, nil
}

// Run runs the agent until ctx ends. The goroutines it starts (the watches of
// its plan and of its own record, the release of server locks) have ended when
// it returns.
func (a *Agent) Run(ctx context.Context) error {
	// The detectors' notifications are asked for before the start's look, so
	// that a change right after that look is not left to the next poll.
	notified, allNotify := a.notifications(ctx)
	bootID, err := a.start(ctx)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if a.opt.Started != nil {
		a.opt.Started()
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer a.bg.Wait()
	defer cancel()
	plans := make(chan store.Plan, 1)
	wg.Go(func() { a.watchPlan(ctx, plans, bootID) })
	changes := make(chan recordChange, 1)
	a.changes = changes
	from := uint64(0)
	if a.published && a.rec.ModifyIndex != a.fileIndex {
		// The start's own read or write: nothing to read back. A record
		// only the file gave (a start with nothing new to write, as after
		// a restart without a reboot) is read: Nomad's state may have gone
		// back under it (guard.go).
		from = a.rec.ModifyIndex
	}
	wg.Go(func() { a.watchRecord(ctx, changes, from) })
	if lf, ok := a.lockFileAtStart(); ok {
		a.startRelease(ctx, lf) // the locks of the reboot that led here, or of an attempt cut short
	}
	a.loop(ctx, bootID, plans, changes, notified, allNotify)
	return nil
}

// start finds out who the host is, picks up its record where an earlier agent
// left it, finishes a reboot rollboot asked for (post-reboot steps), and publishes
// the record for this boot. It returns the boot ID; when ctx ends first, what it
// returns does not count.
func (a *Agent) start(ctx context.Context) (bootID string, err error) {
	nodeID, roles, err := a.identify(ctx)
	if err != nil || ctx.Err() != nil {
		return "", err
	}
	if bootID, err = ReadBootID(a.opt.BootIDFile); err != nil {
		return "", err
	}
	a.log = a.log.With("node_id", nodeID)
	if rec, ok := a.recordFromFile(); ok {
		a.rec, a.last, a.published = rec, rec, true // its own last write (recordfile.go)
		a.fileIndex = rec.ModifyIndex
	} else if err := a.readOwnRecord(ctx); err != nil || ctx.Err() != nil {
		return "", err
	}
	var servers []store.Server
	if a.opt.Servers != nil {
		var ok bool
		if roles, servers, ok = a.discover(ctx, nodeID, roles, bootID); !ok {
			return "", nil
		}
	}
	rebooted := a.published && a.rec.BootID != "" && a.rec.BootID != bootID // the record names the boot before
	a.rec.DiscoverError = ""                                                // also one left by an earlier agent that discovered servers
	a.rec.HoldReason = ""                                                   // a hold is re-established by the go/no-go, if it still applies
	if a.published && a.rec.BootID != bootID && a.rec.RebootingGrant != "" && !a.afterReboot(ctx, roles) {
		return "", nil
	}
	if a.opt.Candidate {
		roles = append(roles, store.RoleCandidate)
	}
	a.setIdentity(ctx, nodeID, roles, servers, bootID)
	a.detect(ctx, true)
	conflicts := a.conflicts
	a.publishSoon(ctx)
	a.planFrom = a.planWatchFrom(rebooted && a.conflicts == conflicts, bootID)
	a.log.Info("agent started", "boot_id", bootID, "roles", strings.Join(roles, ","))
	return bootID, nil
}

// planWatchFrom is the index the plan's watch starts from: past the start's
// own write of the record when the record named the boot before this one and
// that write, the first to name this boot, won its check-and-set at once
// (rebooted); else 0, read first. A grant names the boot of the record it was
// given for, so no plan written before that write can grant this boot: the
// plan then is the cycle's that led here, which its close rewrites soon
// anyway, and the watch need not read it: one request fewer per reboot. A
// host without a record, or with one it cannot read, reads its plan first.
func (a *Agent) planWatchFrom(rebooted bool, bootID string) uint64 {
	if !rebooted || !a.published || a.last.BootID != bootID || !a.last.Equal(a.rec) {
		return 0
	}
	return a.rec.ModifyIndex
}

// identify asks the local Nomad agent, until it answers, who this host is,
// then checks the local Nomad's version (Options.NomadVersion): a Nomad too
// old is an error the agent stops on.
func (a *Agent) identify(ctx context.Context) (nodeID string, roles []string, err error) {
	var v string
	err = a.retry(ctx, "ask the local Nomad agent who this host is", func() (err error) {
		nodeID, roles, v, err = Identity(ctx, a.opt.Local, a.opt.NodeList, a.opt.Host)
		return err
	})
	if err == nil && a.opt.NomadVersion != nil {
		err = a.opt.NomadVersion(v)
	}
	return nodeID, roles, err
}

// readOwnRecord starts from the host record an earlier agent of this host wrote,
// if any. A record garbled by someone else is written anew, with CAS on what is
// there.
func (a *Agent) readOwnRecord(ctx context.Context) error {
	var prev store.HostRecord
	var unreadable error
	err := a.retry(ctx, "read the host record", func() (err error) {
		prev, err = a.opt.Store.Host(ctx, a.opt.Host)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case errors.Is(err, store.ErrUnreadable):
			unreadable = err // not transient: handled below
			return nil
		}
		return err
	})
	switch {
	case ctx.Err() != nil:
		return nil
	case err == nil && unreadable != nil:
		a.log.Warn("own host record unreadable; writing it anew", "err", unreadable)
		a.rec.ModifyIndex, a.published = prev.ModifyIndex, true
	case err != nil:
		return fmt.Errorf("read host record: %w", err)
	case prev.Host != "":
		a.rec, a.last = prev, prev
		a.published = true
	}
	return nil
}

// afterReboot runs on the first start after a reboot rollboot asked for: the
// Consul node leaves maintenance, and the post-reboot hooks run before the new
// boot ID is reported, so that the coordinator waits for them. Both are retried
// until they succeed; it returns false when ctx ends first.
func (a *Agent) afterReboot(ctx context.Context, roles []string) bool {
	if hasRole(roles, store.RoleConsulServer) {
		// Consul keeps a node's maintenance mode across a reboot (the check is
		// persisted): take it out, as it was put in before the reboot.
		if !keepTrying(ctx, time.Second, 30*time.Second, func() error {
			err := a.opt.Servers.ConsulMaintenance(ctx, false, "")
			if err != nil {
				a.log.Warn("cannot take the Consul node out of maintenance; retrying", "err", err)
			}
			return err
		}) {
			return false
		}
	}
	return keepTrying(ctx, 5*time.Second, 5*time.Minute, func() error {
		err := RunHooks(ctx, a.opt.PostHooks, a.opt.HookTimeout, a.opt.PassEnv...)
		if err != nil {
			a.log.Error("post-reboot hook failed; retrying", "err", err)
		}
		return err
	})
}

// setIdentity fills the record with who the host is for this boot. A new boot
// settles the need seen before it and the attempt that led to it: detection
// starts afresh.
func (a *Agent) setIdentity(ctx context.Context, nodeID string, roles []string, servers []store.Server, bootID string) {
	o := a.opt
	a.rec.Host, a.rec.NodeID, a.rec.Hostname, a.rec.Roles = o.Host, nodeID, o.Hostname, roles
	a.rec.Servers = servers
	a.checkVault(ctx)
	a.rec.FleetLockID, a.rec.AgentVersion, a.rec.AgentJob = o.FleetLockID, version.String(), o.AgentJob
	if a.rec.BootID != bootID || a.rec.BootedAt.IsZero() {
		a.rec.BootedAt = a.bootTime()
	}
	if a.rec.BootID != bootID {
		a.rec.BootID = bootID
		a.rec.RebootingGrant, a.rec.Failure = "", nil
		a.rec.RebootRequired, a.rec.Reason, a.rec.RequestedAt, a.rec.Fingerprint = false, "", time.Time{}, ""
	}
}

// bootTime is the host's boot time, zero when it cannot be read (no uptime
// need is then reckoned for it: logged, never a reason to reboot).
func (a *Agent) bootTime() time.Time {
	if a.opt.BootTimeFile == "" {
		return time.Time{}
	}
	t, err := ReadBootTime(a.opt.BootTimeFile)
	if err != nil {
		a.log.Warn("no boot time: max_uptime cannot apply to this host", "err", err)
	}
	return t
}

// loop is the agent's event loop, the only code that touches the record once the
// agent has started: it runs the detectors on their tickers, takes the newest
// plan, restores the record when someone else changed it, publishes what changed,
// and reboots when the plan grants it. It returns when ctx ends.
func (a *Agent) loop(ctx context.Context, bootID string, plans <-chan store.Plan, changes <-chan recordChange,
	notified <-chan struct{}, allNotify bool) {
	every := a.fastEvery(allNotify)
	fast := time.NewTicker(every)
	defer fast.Stop()
	slow := time.NewTicker(a.opt.SlowEvery)
	defer slow.Stop()
	rebooting := false
	var lastPlan store.Plan
	for {
		select {
		case <-ctx.Done():
			return
		case <-notified:
			a.detect(ctx, false)
		case <-fast.C:
			a.detect(ctx, false)
			if a.rec.VaultSealed {
				a.checkVault(ctx) // noticed soon after an operator unseals it
			}
		case <-slow.C:
			a.detect(ctx, true)
			a.checkVault(ctx)
		case p := <-plans:
			lastPlan = p
		case ch := <-changes:
			a.restoreRecord(ctx, ch)
		}
		a.publishSoon(ctx)
		if e := a.fastEvery(allNotify); e != every {
			every = e
			fast.Reset(every)
		}
		select {
		case p := <-plans: // take the newest plan before acting on it
			lastPlan = p
		default:
		}
		if !rebooting && a.mayReboot(lastPlan, bootID) && !a.failedFor(lastPlan.GrantID) && lastPlan.GrantID != a.withdrawn {
			rebooting = a.attemptReboot(ctx, lastPlan, bootID)
			if ctx.Err() != nil {
				return // the machine is going down (or the agent stops)
			}
		}
		if a.mayReboot(lastPlan, bootID) && !rebooting {
			a.resumePlanWatch() // done with the grant: no reboot (yet)
		}
	}
}

// fastEvery is the period of the cheap detectors: PollEvery, or
// NotifiedPollEvery when all of them notify (allNotify) and no sealed Vault
// is waited for (the fast look also notices its unseal).
func (a *Agent) fastEvery(allNotify bool) time.Duration {
	if allNotify && !a.rec.VaultSealed {
		return max(a.opt.PollEvery, a.opt.NotifiedPollEvery)
	}
	return a.opt.PollEvery
}

// notifications returns a channel that receives a value when a polled
// detector that can tell (Notifier) says its answer may have changed, until
// ctx ends (nil: none can), and whether every cheap detector can (at least
// one). Polling goes on beside it, less often when all can: a notification may
// be lost.
func (a *Agent) notifications(ctx context.Context) (<-chan struct{}, bool) {
	var out chan struct{}
	all := true
	for i, d := range a.opt.Detectors {
		if slices.Contains(a.opt.SlowIndexes, i) {
			continue
		}
		n, ok := d.(Notifier)
		if !ok {
			all = false
			continue
		}
		ch, err := n.Changes(ctx)
		if err != nil {
			all = false
			a.log.Info("reboot detector polled only", "detector", i, "every", a.opt.PollEvery, "err", err)
			continue
		}
		if out == nil {
			out = make(chan struct{}, 1)
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
					select {
					case out <- struct{}{}:
					default: // one is waiting already
					}
				}
			}
		}()
	}
	return out, all && out != nil
}

// attemptReboot reboots the host for the grant in p. When the host did not go
// down it says so in the record, so that the coordinator undoes the drain and
// retries later with a new grant; when the attempt was interrupted (the grant
// withdrawn, the store unreachable) it lets the loop try again on the next
// plan or tick: at once for a grant withdrawn (that grant is never tried
// again, and a new one may be waiting already: the coordinator gives its
// slot a rejoin deadline from the grant), after RetryAfter otherwise. It
// reports whether the attempt is still on, so that the loop does not start
// another.
func (a *Agent) attemptReboot(ctx context.Context, p store.Plan, bootID string) (rebooting bool) {
	err := a.reboot(ctx, p, bootID)
	if ctx.Err() != nil {
		return true
	}
	var rf *rebootFailed
	if errors.As(err, &rf) {
		a.reportFailure(ctx, rf.f)
		return false
	}
	a.rec.HoldReason = ""
	if a.opt.RebootFailed != nil {
		a.opt.RebootFailed()
	}
	if errors.As(err, new(errWithdrawn)) {
		a.log.Warn("reboot attempt ended: its grant was withdrawn", "err", err, "grant", p.GrantID)
		a.withdrawn = p.GrantID
		return false
	}
	a.log.Error("reboot attempt interrupted; will retry", "err", err, "grant", p.GrantID)
	return !watch.Sleep(ctx, a.opt.RetryAfter)
}

// mayReboot: the coordinator granted a reboot of this boot of the host and the
// drain is done. The boot ID check makes the reboot happen once per grant, even if
// the agent restarts right before or after it.
func (a *Agent) mayReboot(p store.Plan, bootID string) bool {
	return p.GrantID != "" && p.BootIDAtGrant == bootID &&
		(p.Phase == store.PhaseDrained || p.Phase == store.PhaseRebooting)
}

// reboot carries out the grant in p: the plan must be about this host, the
// go/no-go is made before anything runs and again as the last step (only
// then when nothing runs between: checkedOnce), and a server host holds its
// clusters' reboot locks from that last step until it is back.
func (a *Agent) reboot(ctx context.Context, p store.Plan, bootID string) error {
	once := a.checkedOnce()
	cur := p
	if !once {
		var err error
		if cur, err = a.currentPlan(ctx, p); err != nil {
			return err
		}
	}
	if why := notAboutSelf(cur, a.opt.Host, a.rec.NodeID); why != "" {
		a.log.Error("plan refused: it is not about this host; no hook runs and the host does not reboot",
			"grant", p.GrantID, "why", why)
		return refusal(p.GrantID, why, a.now())
	}
	if why := notItsNeed(cur, a.rec); why != "" {
		a.log.Error("plan refused: this host does not need a reboot; no hook runs and the host does not reboot",
			"grant", p.GrantID, "why", why)
		return refusal(p.GrantID, why, a.now())
	}
	a.log.Info("reboot granted", "grant", p.GrantID, "reason", p.Reason)
	if once {
		a.holdGuard() // the host goes down right after the announcement (guard.go)
		defer a.resumeGuard()
	}
	a.rec.RebootingGrant, a.rec.HoldReason, a.rec.Failure = p.GrantID, "", nil
	if err := a.retry(ctx, "report the reboot", func() error { return a.publish(ctx) }); err != nil {
		return fmt.Errorf("report the reboot: %w", err)
	}
	if !once {
		// The node and quorum gates before anything runs: no hook runs while
		// they hold. Its first check takes the plan just read (currentPlan)
		// instead of reading it again a few milliseconds later; every later
		// one reads it, as the final go/no-go does.
		read := &cur
		if err := a.holdUntilGo(ctx, p, "before the pre-reboot hooks", func(ctx context.Context) (string, error) {
			plan := read
			read = nil
			return a.goNoGoOn(ctx, p, bootID, plan)
		}); err != nil {
			return err
		}
	}
	if err := a.prepare(ctx, p); err != nil {
		return err
	}
	defer a.endServerLocks(ctx)
	if err := a.holdUntilGo(ctx, p, "at the final go/no-go", func(ctx context.Context) (string, error) {
		return a.finalGoNoGo(ctx, p, bootID)
	}); err != nil {
		return err
	}
	return a.rebootNow(ctx, p)
}

// checkedOnce reports whether the final go/no-go is the attempt's only one,
// and its only read of the plan: when nothing runs between the two (no
// pre-reboot hook, no delay, no Consul maintenance) the first would guard
// nothing the final does not, a few milliseconds later, on the plan and the
// node read again. The watch's plan stands for the grant until then: the
// host is refused on it (notAboutSelf, notItsNeed) and announces the reboot
// on it, and a grant withdrawn meanwhile ends the attempt at the final
// go/no-go, as one withdrawn after the first did. A host that runs a server
// keeps both: its gates may hold long, and the coordinator candidate it
// stops before the final one would stay stopped meanwhile. Two requests
// fewer per reboot (docs/performance.md, "The floor of the requests per
// rebooted host").
func (a *Agent) checkedOnce() bool {
	if len(a.opt.PreHooks) > 0 || a.opt.Delay > 0 {
		return false
	}
	for _, r := range a.rec.Roles {
		switch r {
		case store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer:
			return false
		}
	}
	return len(a.rec.Servers) == 0
}

// currentPlan reads the stored plan and checks that it still grants p's reboot.
// The plan seen may be old (a retry after a failed reboot, a slow watch): the
// stored plan must still grant this reboot, or the host could go down undrained
// after a release or a new grant.
func (a *Agent) currentPlan(ctx context.Context, p store.Plan) (store.Plan, error) {
	var cur store.Plan
	if err := a.retry(ctx, "read the plan before rebooting", func() (err error) {
		cur, err = a.opt.Store.Plan(ctx, a.opt.Host)
		return err
	}); err != nil {
		return cur, fmt.Errorf("read the plan before rebooting: %w", err)
	}
	if cur.GrantID != p.GrantID || !a.mayReboot(cur, p.BootIDAtGrant) {
		return cur, errWithdrawn{fmt.Sprintf("the grant %s is no longer current (plan %s, grant %q)", p.GrantID, cur.Phase, cur.GrantID)}
	}
	return cur, nil
}

// prepare runs what comes between the first go/no-go and the last: the
// pre-reboot hooks, the Consul node's maintenance, the coordinator candidate's
// stop and the delay.
func (a *Agent) prepare(ctx context.Context, p store.Plan) error {
	if err := RunHooks(ctx, a.opt.PreHooks, a.opt.HookTimeout, a.opt.PassEnv...); err != nil {
		return failure(store.StepPreHook, p.GrantID, err, a.now())
	}
	if hasRole(a.rec.Roles, store.RoleConsulServer) {
		if err := a.retry(ctx, "put the Consul node in maintenance", func() error {
			return a.opt.Servers.ConsulMaintenance(ctx, true, "rollboot: reboot (grant "+p.GrantID+")")
		}); err != nil {
			return fmt.Errorf("consul maintenance: %w", err)
		}
		a.maintenance = true
	}
	if a.opt.BeforeReboot != nil {
		a.opt.BeforeReboot()
	}
	if !a.sleepRestoring(ctx, a.opt.Delay) {
		return ctx.Err()
	}
	return nil
}

// finalGoNoGo is the last check before the reboot: the go/no-go, then, on a
// server host, its clusters' reboot locks, and once it holds them the quorum
// gate once more (another server may have just come back, or gone).
func (a *Agent) finalGoNoGo(ctx context.Context, p store.Plan, bootID string) (string, error) {
	a.renewDue(ctx) // locks taken at an earlier check stay held while it holds
	hold, err := a.goNoGo(ctx, p, bootID)
	if err != nil || hold != "" {
		return hold, err
	}
	if hold := a.serverLockGate(ctx, p.GrantID, bootID); hold != "" {
		return hold, nil
	}
	if len(a.locks.held) == 0 {
		return "", nil
	}
	return a.quorumGate(ctx), nil
}

// rebootNow reboots the host, renewing its server locks until it goes down.
func (a *Agent) rebootNow(ctx context.Context, p store.Plan) error {
	a.log.Info("rebooting", "grant", p.GrantID)
	stop := a.keepLocks(ctx)
	defer stop()
	if err := a.opt.Rebooter.Reboot(ctx); err != nil {
		return failure(store.StepReboot, p.GrantID, err, a.now())
	}
	// The host should go down now, taking this process with it.
	if !a.sleepRestoring(ctx, a.opt.DownTimeout) {
		return ctx.Err()
	}
	return &rebootFailed{store.RebootFailure{Grant: p.GrantID, Step: store.StepReboot, ExitStatus: 0, At: a.now().UTC(),
		Message: fmt.Sprintf("the reboot method succeeded but the host did not go down within %s", a.opt.DownTimeout)}}
}

// holdUntilGo holds the reboot until check passes: the hold reason is published
// in the host record (so `rollboot status` shows it) and checked again every
// RecheckEvery, the record restored meanwhile if someone else rewrites it; the
// slot stays taken. stage names the check in the logs. It returns check's error
// (the grant withdrawn, the plan refused) or ctx's.
func (a *Agent) holdUntilGo(ctx context.Context, p store.Plan, stage string, check func(context.Context) (string, error)) error {
	for {
		hold, err := check(ctx)
		if err != nil {
			return err
		}
		if hold == "" {
			a.rec.HoldReason = ""
			if a.last.HoldReason == "" {
				return nil
			}
			// Say the hold is over, so that the coordinator counts the time to
			// come back from now; then check once more, so that the check stays
			// right before what it guards.
			if err := a.publish(ctx); err != nil {
				a.log.Warn("publish the end of the hold", "err", err)
				a.last.HoldReason = "" // best effort: do not loop on it
			}
			continue
		}
		if hold != a.rec.HoldReason {
			a.log.Warn("reboot held; checking again", "stage", stage, "grant", p.GrantID, "why", hold,
				"recheck_every", a.opt.RecheckEvery)
		}
		a.resumeGuard() // the record is watched while the reboot waits
		a.rec.HoldReason = hold
		if err := a.publish(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("publish the hold reason", "err", err)
		}
		if !a.sleepRestoring(ctx, a.opt.RecheckEvery) {
			return ctx.Err()
		}
	}
}

// rebootFailed is a reboot attempt that failed on the host (a pre-reboot hook or
// the reboot method): the host did not go down.
type rebootFailed struct{ f store.RebootFailure }

func (e *rebootFailed) Error() string { return e.f.String() }

func failure(step, grant string, err error, now time.Time) *rebootFailed {
	f := store.RebootFailure{Grant: grant, Step: step, ExitStatus: -1, At: now.UTC(), Message: firstLine(err.Error(), maxMessage)}
	var ce *CommandError
	if errors.As(err, &ce) {
		f.ExitStatus = ce.ExitStatus
		f.Message = firstLine(strings.Join(ce.Argv, " "), maxMessage/2)
		if ce.Stderr != "" {
			f.Message += ": " + ce.Stderr
		} else {
			f.Message += ": " + firstLine(ce.Err.Error(), maxMessage/2)
		}
	}
	return &rebootFailed{f}
}

// failedFor reports whether this host's reboot for grant already failed: a grant
// is tried once; the coordinator undoes the drain and grants again after a backoff.
func (a *Agent) failedFor(grant string) bool {
	return a.rec.Failure != nil && a.rec.Failure.Grant == grant
}

// reportFailure publishes a failed reboot attempt and gives the host back: the
// Consul node leaves maintenance and the coordinator candidate stands again.
func (a *Agent) reportFailure(ctx context.Context, f store.RebootFailure) {
	a.log.Error("reboot failed: the host did not go down; reported to the coordinator", "grant", f.Grant,
		"step", f.Step, "exit_status", f.ExitStatus, "err", f.Message)
	a.rec.Failure, a.rec.HoldReason = &f, ""
	if a.maintenance {
		a.maintenance = false
		if err := a.retry(ctx, "take the Consul node out of maintenance", func() error {
			return a.opt.Servers.ConsulMaintenance(ctx, false, "")
		}); err != nil && ctx.Err() == nil {
			a.log.Error("cannot take the Consul node out of maintenance", "err", err)
		}
	}
	if err := a.retry(ctx, "report the failed reboot", func() error { return a.publish(ctx) }); err != nil && ctx.Err() == nil {
		a.log.Error("cannot report the failed reboot", "err", err)
	}
	if a.opt.RebootFailed != nil {
		a.opt.RebootFailed()
	}
}

// publishSoon publishes the record unless a recent failure asks to wait: a
// failing Nomad is not hammered every poll, and a change is never lost (the
// record is compared with what was last written).
func (a *Agent) publishSoon(ctx context.Context) {
	if a.now().Before(a.pubNext) {
		return
	}
	if err := a.publish(ctx); err != nil {
		a.pubFails++
		base, maxWait := transientBase, transientMax
		if classify(err) == denied {
			base, maxWait = deniedBase, deniedMax
			a.log.Error("publish host record: permission denied: the token is unknown, revoked or lacks a right", "err", err)
		} else {
			a.log.Warn("publish host record", "err", err, "attempt", a.pubFails)
		}
		a.pubNext = a.now().Add(policy.Backoff(base, maxWait, a.pubFails))
		return
	}
	a.pubFails, a.pubNext = 0, time.Time{}
}

// detect runs the detectors (the slow ones only when slow is true) and updates the
// record's need. A detector error never makes or clears a need: the detector's last
// answer stands, and the error is published for the operator.
func (a *Agent) detect(ctx context.Context, slow bool) {
	var errs []string
	for i, d := range a.opt.Detectors {
		if slices.Contains(a.opt.SlowIndexes, i) == slow || slow {
			need, err := d.RebootRequired(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					if a.detected[i].err == nil || a.detected[i].err.Error() != err.Error() {
						a.log.Error("reboot detection failed (not a reason to reboot)", "err", err)
					}
					a.detected[i].err = err
				}
			} else {
				a.detected[i] = detection{need: need, known: true}
			}
		}
		if a.detected[i].err != nil {
			errs = append(errs, a.detected[i].err.Error())
		}
	}
	a.rec.DetectError = strings.Join(errs, "; ")
	need := combineNeeds(a.detected)
	if need.Required && (!a.rec.RebootRequired || need.Fingerprint != a.rec.Fingerprint) {
		// A need first seen, or one whose fingerprint changed (more was
		// installed since): a new need, which the reboot-loop guard does not
		// take for the one the last reboot did not clear.
		a.rec.RequestedAt = a.now().UTC()
		a.log.Info("reboot required", "reason", need.Reason, "fingerprint", need.Fingerprint)
	}
	if !need.Required {
		a.rec.RequestedAt = time.Time{}
	}
	a.rec.RebootRequired, a.rec.Reason, a.rec.Fingerprint = need.Required, need.Reason, need.Fingerprint
}

// combineNeeds is the host's need from its detectors' last answers: required
// when one says so, with their reasons and fingerprints joined in detector
// order (a detector without a fingerprint adds none).
func combineNeeds(ds []detection) Need {
	var reasons, prints []string
	for _, d := range ds {
		if !d.known || !d.need.Required {
			continue
		}
		reasons = append(reasons, d.need.Reason)
		if d.need.Fingerprint != "" {
			prints = append(prints, d.need.Fingerprint)
		}
	}
	return Need{Required: len(reasons) > 0, Reason: strings.Join(reasons, "; "), Fingerprint: strings.Join(prints, ",")}
}

// publish writes the host record when it differs from what this agent last wrote,
// with CAS; on a conflict (an earlier incarnation of this agent wrote) it takes the
// stored index and retries. It reads nothing when nothing changed, so an idle agent
// puts no load on the Nomad servers.
func (a *Agent) publish(ctx context.Context) error {
	if a.published && a.last.Equal(a.rec) {
		return nil
	}
	for attempt := 0; attempt < 3; attempt++ {
		idx, err := a.opt.Store.PutHost(ctx, a.rec)
		if errors.Is(err, store.ErrConflict) {
			a.conflicts++
			cur, rerr := a.opt.Store.Host(ctx, a.opt.Host)
			switch {
			case errors.Is(rerr, store.ErrNotFound):
				a.rec.ModifyIndex = 0
			case rerr != nil && !errors.Is(rerr, store.ErrUnreadable): // a garbled record is overwritten
				return rerr
			default:
				a.rec.ModifyIndex = cur.ModifyIndex
			}
			continue
		}
		if err != nil {
			return err
		}
		a.rec.ModifyIndex, a.published = idx, true
		a.last = a.rec
		a.keepRecord(a.rec)
		a.recordWrites.Add(1) // the coordinator may plan the host now
		select {
		case a.planExpected <- struct{}{}:
		default:
		}
		return nil
	}
	return errors.New("host record kept changing under the agent")
}

// discover asks which servers run on the host until it can tell. Not knowing is no
// answer: a wrong "no server here" would skip the quorum gates. Meanwhile the host
// record says why (DiscoverError), so the coordinator admits no reboot of the host
// and `rollboot status` shows the reason. It returns false when ctx ends.
func (a *Agent) discover(ctx context.Context, nodeID string, roles []string, bootID string) ([]string, []store.Server, bool) {
	var found []string
	var servers []store.Server
	ok := keepTrying(ctx, time.Second, 30*time.Second, func() (err error) {
		found, servers, err = a.opt.Servers.Discover(ctx, discovery.NomadSelf{
			Client: nodeID != "", Server: hasRole(roles, store.RoleNomadServer), NodeID: nodeID})
		if err == nil || ctx.Err() != nil {
			return err
		}
		a.log.Warn("cannot tell which servers run on this host; retrying", "err", err)
		a.rec.DiscoverError = err.Error()
		if !a.published {
			// No record yet: say who the host is, so that status lists it. An
			// existing record keeps its boot ID: a new boot is reported only after
			// discovery and the post-reboot hooks.
			a.rec.Host, a.rec.NodeID, a.rec.Hostname, a.rec.Roles = a.opt.Host, nodeID, a.opt.Hostname, roles
			a.rec.BootID, a.rec.AgentVersion = bootID, version.String()
		}
		if perr := a.publish(ctx); perr != nil {
			a.log.Warn("publish host record", "err", perr)
		}
		return err
	})
	if !ok {
		return nil, nil, false
	}
	a.rec.DiscoverError = ""
	return found, servers, true
}

// checkVault records whether the host's Vault server is sealed.
func (a *Agent) checkVault(ctx context.Context) {
	if a.opt.Servers == nil || !hasRole(a.rec.Roles, store.RoleVaultServer) {
		return
	}
	sealed, err := a.opt.Servers.VaultSealed(ctx)
	if err != nil {
		a.log.Debug("vault seal status", "err", err)
		return
	}
	if sealed != a.rec.VaultSealed {
		a.log.Info("vault seal status changed", "sealed", sealed)
	}
	a.rec.VaultSealed = sealed
}

func hasRole(roles []string, role string) bool { return slices.Contains(roles, role) }

// watchPlan follows this host's plan with blocking queries and offers each new
// one to the loop. A refused token is retried slowly and logged as an error; a
// plan not written yet is looked for again every PollEvery.
//
// Once it offered a plan that grants this boot's reboot, it asks no more
// until the loop is done with it (resumePlanWatch): the attempt reads the
// plan itself where it must (the grant's check, the final go/no-go), and
// the host goes down at its end. Meanwhile the coordinator's next write (it
// records the agent's announcement) would only wake a query for nothing, and
// the query after it would be cut by the reboot: two requests per reboot.
//
// While the host has no plan (before the coordinator first queued it), Nomad
// answers the query at the writes of other plans near its path, not only at
// its plan's creation (store/absent.go, "Watching what is not there"): after
// such an answer the watch waits before it asks again (AbsentPlanWait,
// doubling up to 5 minutes), and starts over at once when the agent writes its
// record, the write the coordinator answers with the host's first plan.
func (a *Agent) watchPlan(ctx context.Context, out chan store.Plan, bootID string) {
	var plan store.Plan
	var found, hold bool
	absentWoken := 0
	var written uint64 // the agent's record writes when the last query was sent
	watch.Loop{
		Query: func(ctx context.Context, idx uint64) (uint64, error) {
			if hold {
				select {
				case <-a.planResume:
				case <-ctx.Done():
					return idx, ctx.Err()
				}
				hold = false
			}
			ask := idx
			if absentWoken > 0 {
				expected, ok := a.awaitPlan(ctx, absentWoken, written)
				if !ok {
					return idx, ctx.Err()
				}
				if expected {
					// The index asked with is stale: the writes near the
					// path moved it during the wait. Ask where it is now, and
					// block from there.
					absentWoken, ask = 0, 0
				}
			}
			written = a.recordWrites.Load()
			p, n, err := a.opt.Store.WatchPlan(ctx, a.opt.Host, ask, a.opt.WatchWait)
			missing := errors.Is(err, store.ErrNotFound)
			switch {
			case err != nil && !missing:
				return 0, err
			case missing && n <= idx:
				// No plan yet and nothing to block on: look again shortly.
				watch.Sleep(ctx, a.opt.PollEvery)
				return idx, ctx.Err()
			case n == idx:
				absentWoken = 0
				return idx, nil // the wait ran out with no change
			case missing:
				if ask > 0 {
					absentWoken++ // woken by a write near its path
				}
				return n, nil
			}
			absentWoken = 0
			plan, found = p, !missing
			hold = found && a.mayReboot(p, bootID)
			return n, nil
		},
		OnChange: func(uint64) {
			if found {
				offerNewest(out, plan)
			}
		},
		Retry:   watchRetry,
		OnError: a.watchFailed("watch plan"),
		Index:   a.planFrom, // past the start's own write, when no plan before it can grant this boot
	}.Run(ctx)
}

// awaitPlan waits before the plan's watch asks again for a plan still
// absent after woken answers in a row (watchPlan), unless the agent wrote its
// record since the last query was sent (written: its count of writes then),
// or until it does. It reports whether a record write ended it (expected),
// and false (ok) when ctx ended.
func (a *Agent) awaitPlan(ctx context.Context, woken int, written uint64) (expected, ok bool) {
	select {
	case <-a.planExpected: // told of a write the count below shows, or of one before it
	default:
	}
	if a.recordWrites.Load() != written {
		return true, true
	}
	t := time.NewTimer(policy.Backoff(a.opt.AbsentPlanWait, 5*time.Minute, woken))
	defer t.Stop()
	select {
	case <-t.C:
		return false, true
	case <-a.planExpected:
		return true, true
	case <-ctx.Done():
		return false, false
	}
}

// resumePlanWatch lets the plan's watch ask again after a plan that granted
// the reboot (watchPlan); a resume it does not wait for is kept for its next
// hold, which then asks at once.
func (a *Agent) resumePlanWatch() {
	select {
	case a.planResume <- struct{}{}:
	default:
	}
}

// watchFailed logs a failed watch: a refused token as an error (it will not heal
// by itself), anything else at debug level (the loop retries).
func (a *Agent) watchFailed(what string) func(err error, fails int, retry time.Duration) {
	return func(err error, _ int, d time.Duration) {
		if classify(err) == denied {
			a.log.Error("permission denied: the token is unknown, revoked or lacks a right; retrying slowly",
				"op", what, "err", err, "retry_in", d)
			return
		}
		a.log.Debug("watch failed; retrying", "op", what, "err", err)
	}
}

// watchRetry is the wait after the fails-th failed watch in a row (of the plan or
// of the host record): a refused token is not going to heal by itself, so it is
// retried slowly.
func watchRetry(err error, fails int) time.Duration {
	if classify(err) == denied {
		return policy.Backoff(deniedBase, deniedMax, fails)
	}
	return policy.Backoff(200*time.Millisecond, 10*time.Second, fails)
}

// offerNewest puts v in out (a channel of capacity 1 with this one sender),
// replacing a value the receiver has not taken yet: the receiver only ever acts
// on the newest.
func offerNewest[T any](out chan T, v T) {
	select {
	case out <- v:
	default:
		select {
		case <-out:
		default:
		}
		out <- v
	}
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/version"
)

// SelfAPI is the local Nomad agent's /v1/agent/self; *api.Agent implements it.
type SelfAPI interface {
	Self() (*api.AgentSelf, error)
}

// ServerProbe asks the host's local Consul and Vault (and Nomad) agents which
// servers run here, and acts on the local Consul agent.
type ServerProbe interface {
	// Discover returns the host's roles and its servers.
	Discover(ctx context.Context) (roles []string, servers []store.Server, err error)
	// VaultSealed reports whether the local Vault server is sealed.
	VaultSealed(ctx context.Context) (bool, error)
	// ConsulMaintenance puts the local Consul node in maintenance mode, or takes
	// it out.
	ConsulMaintenance(ctx context.Context, enable bool, reason string) error
}

// Options configure an agent.
type Options struct {
	Host        string // the host's name in rollboot (default: the hostname)
	Candidate   bool   // a coordinator candidate runs beside the agent
	Hostname    string
	Store       *store.Store
	Self        SelfAPI
	BootIDFile  string
	FleetLockID string

	// Servers, when set, discovers the Nomad, Consul and Vault servers on the host
	// (roles come from the local Nomad agent alone otherwise).
	Servers ServerProbe

	Detectors   []Detector
	PollEvery   time.Duration // how often cheap detectors (the sentinel file) run; default 500ms
	SlowEvery   time.Duration // how often slow detectors (a command) run; default 5m
	SlowIndexes []int         // indexes in Detectors that are slow

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

	// Nodes reads the host's node as Nomad reports it, for the final go/no-go;
	// Clusters reads the server clusters' health for a server host's pre-reboot
	// gate. Without Nodes the node is not checked; without Clusters a server host
	// never reboots.
	Nodes    NodeAPI
	Clusters ClusterReader
	// Force: the drain policy forces drains at their deadline (drain.on_timeout =
	// "force"), so allocations still on the node do not hold the reboot.
	Force bool
	// RecheckEvery is how often a held reboot checks its go/no-go again; default 5s.
	RecheckEvery time.Duration
	// DownTimeout is how long the host may take to go down after the reboot
	// method succeeded before the attempt counts as failed; default 5m.
	DownTimeout time.Duration
	// AgentJob is the Nomad system job the agent runs as ("<namespace>/<job>").
	AgentJob string

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
	detected  []detection // last answer of each detector
	pubFails  int         // consecutive failed publishes
	pubNext   time.Time   // no publish before this (backoff after failures)
}

type detection struct {
	required bool
	reason   string
	err      error
	known    bool
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
	if a.opt.RetryAfter <= 0 {
		a.opt.RetryAfter = 10 * time.Second
	}
	if a.opt.HookTimeout <= 0 {
		a.opt.HookTimeout = 5 * time.Minute
	}
	if a.opt.RecheckEvery <= 0 {
		a.opt.RecheckEvery = 5 * time.Second
	}
	if a.opt.DownTimeout <= 0 {
		a.opt.DownTimeout = 5 * time.Minute
	}
	a.detected = make([]detection, len(opt.Detectors))
	return a
}

// Identity asks the local Nomad agent who this host is: the client's node ID
// (stats.client.node_id) and whether it runs a Nomad server (stats.nomad.server).
func Identity(self SelfAPI) (nodeID string, roles []string, err error) {
	s, err := self.Self()
	if err != nil {
		return "", nil, fmt.Errorf("local Nomad agent: %w", err)
	}
	if c := s.Stats["client"]; c != nil && c["node_id"] != "" {
		nodeID = c["node_id"]
		roles = append(roles, store.RoleNomadClient)
	}
	if n := s.Stats["nomad"]; n != nil && n["server"] == "true" {
		roles = append(roles, store.RoleNomadServer)
	}
	return nodeID, roles, nil
}

// Run runs the agent until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	o := a.opt
	var nodeID string
	var roles []string
	err := a.retry(ctx, "ask the local Nomad agent who this host is", func() (err error) {
		nodeID, roles, err = Identity(o.Self)
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	bootID, err := ReadBootID(o.BootIDFile)
	if err != nil {
		return err
	}
	a.log = a.log.With("node_id", nodeID)

	var prev store.HostRecord
	var unreadable error
	err = a.retry(ctx, "read the host record", func() (err error) {
		prev, err = o.Store.Host(ctx, o.Host)
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
		// Garbled by someone else: written anew, with CAS on what is there.
		a.log.Warn("own host record unreadable; writing it anew", "err", unreadable)
		a.rec.ModifyIndex, a.published = prev.ModifyIndex, true
	case err != nil:
		return fmt.Errorf("read host record: %w", err)
	case prev.Host != "":
		a.rec, a.last = prev, prev
		a.published = true
	}
	var servers []store.Server
	if o.Servers != nil {
		var ok bool
		if roles, servers, ok = a.discover(ctx, nodeID, roles, bootID); !ok {
			return nil
		}
	}
	a.rec.DiscoverError = "" // also one left by an earlier agent that discovered servers
	a.rec.HoldReason = ""    // a hold is re-established by the go/no-go, if it still applies
	if a.published && a.rec.BootID != bootID && a.rec.RebootingGrant != "" && hasRole(roles, store.RoleConsulServer) {
		// Consul keeps a node's maintenance mode across a reboot (the check is
		// persisted): take it out, as it was put in before the reboot.
		for attempt := 1; ; attempt++ {
			err := o.Servers.ConsulMaintenance(ctx, false, "")
			if err == nil {
				break
			}
			a.log.Warn("cannot take the Consul node out of maintenance; retrying", "err", err)
			if !wait(ctx, policy.Backoff(time.Second, 30*time.Second, attempt)) {
				return nil
			}
		}
	}
	if a.published && a.rec.BootID != bootID && a.rec.RebootingGrant != "" {
		// First start after a reboot rollboot asked for: post-reboot hooks run
		// before the new boot ID is reported, so the coordinator waits for them.
		for attempt := 1; ; attempt++ {
			err := RunHooks(ctx, o.PostHooks, o.HookTimeout, o.PassEnv...)
			if err == nil {
				break
			}
			a.log.Error("post-reboot hook failed; retrying", "err", err)
			if !wait(ctx, policy.Backoff(5*time.Second, 5*time.Minute, attempt)) {
				return nil
			}
		}
	}
	if o.Candidate {
		roles = append(roles, store.RoleCandidate)
	}
	a.rec.Host, a.rec.NodeID, a.rec.Hostname, a.rec.Roles = o.Host, nodeID, o.Hostname, roles
	a.rec.Servers = servers
	a.checkVault(ctx)
	a.rec.FleetLockID, a.rec.AgentVersion, a.rec.AgentJob = o.FleetLockID, version.Version, o.AgentJob
	if a.rec.BootID != bootID {
		a.rec.BootID = bootID
		a.rec.RebootingGrant, a.rec.Failure = "", nil
		// The need seen before the reboot is settled; detection starts afresh.
		a.rec.RebootRequired, a.rec.Reason, a.rec.RequestedAt = false, "", time.Time{}
	}
	a.detect(ctx, true)
	a.publishSoon(ctx)
	a.log.Info("agent started", "boot_id", bootID, "roles", strings.Join(roles, ","))

	plans := make(chan store.Plan, 1)
	go a.watchPlan(ctx, plans)
	changes := make(chan recordChange, 1)
	go a.watchRecord(ctx, changes)

	fast := time.NewTicker(o.PollEvery)
	defer fast.Stop()
	slow := time.NewTicker(o.SlowEvery)
	defer slow.Stop()
	rebooting := false
	var lastPlan store.Plan
	for {
		select {
		case <-ctx.Done():
			return nil
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
		select {
		case p := <-plans: // take the newest plan before acting on it
			lastPlan = p
		default:
		}
		if !rebooting && a.mayReboot(lastPlan, bootID) && !a.failedFor(lastPlan.GrantID) {
			rebooting = true
			err := a.reboot(ctx, lastPlan, bootID)
			if ctx.Err() != nil {
				return nil // the machine is going down (or the agent stops)
			}
			var rf *rebootFailed
			if errors.As(err, &rf) {
				// The host did not go down: say so in the record, so that the
				// coordinator undoes the drain and retries later with a new grant.
				a.reportFailure(ctx, rf.f)
				rebooting = false
				continue
			}
			a.log.Error("reboot attempt interrupted; will retry", "err", err, "grant", lastPlan.GrantID)
			a.rec.HoldReason = ""
			if a.opt.RebootFailed != nil {
				a.opt.RebootFailed()
			}
			rebooting = !wait(ctx, a.opt.RetryAfter) // retry on the next plan or tick
			continue
		}
	}
}

// mayReboot: the coordinator granted a reboot of this boot of the host and the
// drain is done. The boot ID check makes the reboot happen once per grant, even if
// the agent restarts right before or after it.
func (a *Agent) mayReboot(p store.Plan, bootID string) bool {
	return p.GrantID != "" && p.BootIDAtGrant == bootID &&
		(p.Phase == store.PhaseDrained || p.Phase == store.PhaseRebooting)
}

func (a *Agent) reboot(ctx context.Context, p store.Plan, bootID string) error {
	// The plan seen may be old (a retry after a failed reboot, a slow watch): the
	// stored plan must still grant this reboot, or the host could go down
	// undrained after a release or a new grant.
	var cur store.Plan
	if err := a.retry(ctx, "read the plan before rebooting", func() (err error) {
		cur, err = a.opt.Store.Plan(ctx, a.opt.Host)
		return err
	}); err != nil {
		return fmt.Errorf("read the plan before rebooting: %w", err)
	}
	if cur.GrantID != p.GrantID || !a.mayReboot(cur, p.BootIDAtGrant) {
		return fmt.Errorf("the grant %s is no longer current (plan %s, grant %q)", p.GrantID, cur.Phase, cur.GrantID)
	}
	a.log.Info("reboot granted", "grant", p.GrantID, "reason", p.Reason)
	a.rec.RebootingGrant, a.rec.HoldReason, a.rec.Failure = p.GrantID, "", nil
	if err := a.retry(ctx, "report the reboot", func() error { return a.publish(ctx) }); err != nil {
		return fmt.Errorf("report the reboot: %w", err)
	}
	if err := RunHooks(ctx, a.opt.PreHooks, a.opt.HookTimeout, a.opt.PassEnv...); err != nil {
		return failure(store.StepPreHook, p.GrantID, err, a.now())
	}
	if hasRole(a.rec.Roles, store.RoleConsulServer) {
		if err := a.retry(ctx, "put the Consul node in maintenance", func() error {
			return a.opt.Servers.ConsulMaintenance(ctx, true, "rollboot: reboot (grant "+p.GrantID+")")
		}); err != nil {
			return fmt.Errorf("consul maintenance: %w", err)
		}
	}
	if a.opt.BeforeReboot != nil {
		a.opt.BeforeReboot()
	}
	if !wait(ctx, a.opt.Delay) {
		return ctx.Err()
	}
	if err := a.finalCheck(ctx, p, bootID); err != nil {
		return err
	}
	a.log.Info("rebooting", "grant", p.GrantID)
	if err := a.opt.Rebooter.Reboot(ctx); err != nil {
		return failure(store.StepReboot, p.GrantID, err, a.now())
	}
	// The host should go down now, taking this process with it.
	if !wait(ctx, a.opt.DownTimeout) {
		return ctx.Err()
	}
	return &rebootFailed{store.RebootFailure{Grant: p.GrantID, Step: store.StepReboot, ExitStatus: 0, At: a.now().UTC(),
		Message: fmt.Sprintf("the reboot method succeeded but the host did not go down within %s", a.opt.DownTimeout)}}
}

// finalCheck holds the reboot until the go/no-go passes: the hold reason is
// published in the host record (so `rollboot status` shows it) and checked again
// every RecheckEvery; the slot stays taken meanwhile. It returns an error when the
// grant was withdrawn or ctx ended.
func (a *Agent) finalCheck(ctx context.Context, p store.Plan, bootID string) error {
	for {
		hold, err := a.goNoGo(ctx, p, bootID)
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
			// the last step before the reboot.
			if err := a.publish(ctx); err != nil {
				a.log.Warn("publish the end of the hold", "err", err)
				a.last.HoldReason = "" // best effort: do not loop on it
			}
			continue
		}
		if hold != a.rec.HoldReason {
			a.log.Warn("reboot held at the final go/no-go; checking again", "grant", p.GrantID, "why", hold,
				"recheck_every", a.opt.RecheckEvery)
		}
		a.rec.HoldReason = hold
		if err := a.publish(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("publish the hold reason", "err", err)
		}
		if !wait(ctx, a.opt.RecheckEvery) {
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
	if hasRole(a.rec.Roles, store.RoleConsulServer) && f.Step == store.StepReboot {
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
	required, reasons := false, []string{}
	for i, d := range a.opt.Detectors {
		if slices.Contains(a.opt.SlowIndexes, i) == slow || slow {
			req, why, err := d.RebootRequired(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					if a.detected[i].err == nil || a.detected[i].err.Error() != err.Error() {
						a.log.Error("reboot detection failed (not a reason to reboot)", "err", err)
					}
					a.detected[i].err = err
				}
			} else {
				a.detected[i] = detection{required: req, reason: why, known: true}
			}
		}
		if a.detected[i].err != nil {
			errs = append(errs, a.detected[i].err.Error())
		}
		if a.detected[i].known && a.detected[i].required {
			required = true
			reasons = append(reasons, a.detected[i].reason)
		}
	}
	a.rec.DetectError = strings.Join(errs, "; ")
	if required && !a.rec.RebootRequired {
		a.rec.RequestedAt = a.now().UTC()
		a.log.Info("reboot required", "reason", strings.Join(reasons, "; "))
	}
	if !required {
		a.rec.RequestedAt = time.Time{}
	}
	a.rec.RebootRequired = required
	a.rec.Reason = strings.Join(reasons, "; ")
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
		return nil
	}
	return errors.New("host record kept changing under the agent")
}

// discover asks which servers run on the host until it can tell. Not knowing is no
// answer: a wrong "no server here" would skip the quorum gates. Meanwhile the host
// record says why (DiscoverError), so the coordinator admits no reboot of the host
// and `rollboot status` shows the reason. It returns false when ctx ends.
func (a *Agent) discover(ctx context.Context, nodeID string, roles []string, bootID string) ([]string, []store.Server, bool) {
	for attempt := 1; ; attempt++ {
		r, srv, err := a.opt.Servers.Discover(ctx)
		if err == nil {
			a.rec.DiscoverError = ""
			return r, srv, true
		}
		if ctx.Err() != nil {
			return nil, nil, false
		}
		a.log.Warn("cannot tell which servers run on this host; retrying", "err", err)
		a.rec.DiscoverError = err.Error()
		if !a.published {
			// No record yet: say who the host is, so that status lists it. An
			// existing record keeps its boot ID: a new boot is reported only after
			// discovery and the post-reboot hooks.
			a.rec.Host, a.rec.NodeID, a.rec.Hostname, a.rec.Roles = a.opt.Host, nodeID, a.opt.Hostname, roles
			a.rec.BootID, a.rec.AgentVersion = bootID, version.Version
		}
		if err := a.publish(ctx); err != nil {
			a.log.Warn("publish host record", "err", err)
		}
		if !wait(ctx, policy.Backoff(time.Second, 30*time.Second, attempt)) {
			return nil, nil, false
		}
	}
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

// watchPlan follows this host's plan with blocking queries and sends each new one.
func (a *Agent) watchPlan(ctx context.Context, out chan store.Plan) {
	var idx uint64
	fails := 0
	for ctx.Err() == nil {
		p, n, err := a.opt.Store.WatchPlan(ctx, a.opt.Host, idx, 5*time.Minute)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			fails++
			d := policy.Backoff(200*time.Millisecond, 10*time.Second, fails)
			if ctx.Err() == nil && classify(err) == denied {
				d = policy.Backoff(deniedBase, deniedMax, fails)
				a.log.Error("watch plan: permission denied: the token is unknown, revoked or lacks a right; retrying slowly",
					"err", err, "retry_in", d)
			} else if ctx.Err() == nil {
				a.log.Debug("watch plan", "err", err)
			}
			if !wait(ctx, d) {
				return
			}
			idx = 0
			continue
		}
		fails = 0
		if errors.Is(err, store.ErrNotFound) && n <= idx {
			// No plan yet and nothing to block on: look again shortly.
			if !wait(ctx, a.opt.PollEvery) {
				return
			}
			continue
		}
		if n == idx && n != 0 {
			continue // the wait ran out with no change
		}
		idx = n
		if err == nil {
			select {
			case out <- p:
			case <-ctx.Done():
				return
			default:
				// Replace a plan the loop has not taken yet with the newer one.
				select {
				case <-out:
				default:
				}
				out <- p
			}
		}
	}
}

func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

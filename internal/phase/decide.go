package phase

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// This file is the phase machine: a pure function of (plan, observation, now) that
// returns the next plan and the Nomad operations to apply. It does no I/O, so every
// transition is a table test, and a coordinator that restarts at any instant just
// calls it again on what is stored.

// Timing is the part of the policy the phase machine needs.
type Timing struct {
	DrainDeadline   time.Duration
	ForceOnTimeout  bool // drain.on_timeout = "force"
	RetryBackoff    time.Duration
	RetryMaxBackoff time.Duration
	RejoinTimeout   time.Duration
	LoopBackoff     time.Duration
	LoopMaxBackoff  time.Duration
	// NodeGoneGrace: how long the node of a cycle may be gone (Input.NodeGone)
	// before its slot is released (coordinator.purged_node_grace).
	NodeGoneGrace time.Duration
}

// NodeView is what the coordinator observed of a host's Nomad node.
type NodeView struct {
	ID          string
	Status      string // ready, down, initializing, disconnected
	Eligible    bool
	Draining    bool   // DrainStrategy != nil
	DrainStatus string // LastDrain.Status: draining, complete, canceled
	DrainGrant  string // LastDrain.Meta["rollboot_grant"]: the grant that started the last drain
	// DrainRestores: LastDrain.Meta["rollboot_eligible_before"] is "true": the
	// node was eligible when rollboot's last drain of it started.
	DrainRestores bool
	// DrainStartedAt is LastDrain.StartedAt (Nomad's clock).
	DrainStartedAt time.Time
	// DrainBySelf: the last drain is the node's own client's, the drain a
	// client configured with drain_on_shutdown starts when its agent leaves
	// (client/drain.go DrainSelf). The servers record who drained
	// (LastDrain.AccessorID "client:<node ID>", from the request's
	// authenticated identity: nomad/node_endpoint.go UpdateDrain, Nomad 1.7.7
	// and later), so no host record and no operator's token can claim it.
	DrainBySelf bool
	// SystemRunning holds the system jobs with a running allocation on the node.
	SystemRunning map[string]bool
	// ModifyIndex is the node's ModifyIndex.
	ModifyIndex uint64
	// ReregisteredIndex is the index of the node's last re-registration event
	// (0: none seen): "Node reregistered by heartbeat", which Nomad adds when a
	// node that was down heartbeats again (node_endpoint.go UpdateStatus), or the
	// older "Node re-registered" (state_store.go upsertNodeTxn).
	ReregisteredIndex uint64
	// MissedHeartbeatIndex is the index of the node's last "Node heartbeat
	// missed" event (0: none seen): Nomad adds it when the node goes down or
	// disconnected (nomad/heartbeat.go invalidateHeartbeat). A node that was
	// disconnected comes back through initializing with no re-registration event.
	MissedHeartbeatIndex uint64
	// ClientStartedAt is when the node's Nomad client process last started,
	// as its drivers' fingerprints tell (the newest Drivers[*].UpdateTime: a
	// client starts with none and fingerprints each again, client/client.go
	// setupNode), by the client's clock.
	ClientStartedAt time.Time
	// EligibilityIndex and DrainDoneIndex are the indexes of the node's last
	// eligibility event and last "Node drain complete" event (0: none seen),
	// read with the heartbeat events.
	EligibilityIndex, DrainDoneIndex uint64
}

// toStuck reports the host stuck: its slot stays taken and why is shown. A
// host with neither a Nomad node nor a server keeps no slot (abandon).
func toStuck(in Input, d Decision, p store.Plan, why string) Decision {
	if holdsNoSlotStuck(in) {
		d = abandon(in, d, p, why)
		d.Failure = policy.FailStuck
		return d
	}
	d.Plan = enter(p, store.PhaseStuck, in.Now)
	d.Plan.LastError = why
	d.Write, d.Event = true, "stuck" // why: in LastError
	d.Failure = policy.FailStuck
	return d
}

// rebootSeen says how the host is known to have rebooted since its grant ("" if
// it is not), from a sign of its clusters, never from its record alone (a
// record is the host's claim, and any host can write any record):
//   - its node missed heartbeats after the drain completed and is ready again,
//     once the agent said it is rebooting for this grant (nodeCameBack);
//   - its agent reports a new boot ID, and its Nomad client started again after
//     the drain completed (clientRestarted): a reboot shorter than the
//     heartbeat TTL leaves the node ready throughout;
//   - for a host without a node that runs servers: a new boot ID, and each of
//     its servers seen gone and back by its cluster after the drain (serversCameBack);
//   - for a host without a node or a server (an operator-listed host, a
//     FleetLock client), its own report is all there is (reportedBack): the
//     operator vouched for the host by listing it or allowing its id.
func rebootSeen(in Input, p store.Plan) string {
	if in.Host != nil && in.Host.RebootingGrant == p.GrantID && nodeCameBack(in.Node, p) {
		return "node missed heartbeats during the reboot and is ready again"
	}
	back := reportedBack(in.Host, p)
	switch {
	case back == "":
		return ""
	case in.Node != nil:
		if clientRestarted(in.Node, p) {
			return back + " and its Nomad client started again"
		}
		return ""
	case len(in.Host.Servers) > 0:
		if serversCameBack(in, p) {
			return back + " and its servers left and rejoined their clusters"
		}
		return ""
	}
	return back
}

// drainedAt is when the coordinator saw the drain of the current grant
// complete (zero before).
func drainedAt(p store.Plan) time.Time { return p.Timeline[store.PhaseDrained] }

// clientRestarted: the node's Nomad client process started after the drain
// completed (its drivers were fingerprinted anew), as a reboot makes it.
func clientRestarted(n *NodeView, p store.Plan) bool {
	at := drainedAt(p)
	return !at.IsZero() && n.ClientStartedAt.After(at)
}

// serversCameBack: every server of the host is listed by its cluster, with a
// StableSince not older than at the grant, compared to the second. Autopilot
// restarts a server's StableSince when its health changes (raft-autopilot
// buildServerState); Nomad and Consul report it rounded to the nearest second
// (command/agent/operator_endpoint.go OperatorServerHealth, up to half a
// second in the future), Vault to the nanosecond (sys/storage/raft/autopilot/
// state). The latest of a host's servers at the grant may so be a Nomad time
// rounded up past the instant its Vault server went down and came back sealed
// (whose StableSince then stays put until it is unsealed): compared to the
// nanosecond, such a host was never seen back. A reboot within the second
// cannot be told from none: a listed server counts. A forged boot ID then moves the host's cycle
// on early at worst: its slot still waits for the post-reboot gate (healthy,
// stable for server_stable_for, a voter), and the next server of the cluster
// for this host's server reboot lock, which its agent holds until it is back. Whether it is back in full
// (healthy, stable, a voter, unsealed) is the rejoin's post-reboot gate, which
// holds the slot until it is.
func serversCameBack(in Input, p store.Plan) bool {
	if p.ServersStableSince.IsZero() || len(in.Host.Servers) == 0 {
		return false
	}
	at := p.ServersStableSince.Round(time.Second)
	for _, srv := range in.Host.Servers {
		s, ok := in.Clusters[ClusterKey(srv)].Server(srv.ID)
		if !ok || s.StableSince.Round(time.Second).Before(at) {
			return false
		}
	}
	return true
}

// serversStableSince is the latest StableSince of the host's servers as the
// pass read their clusters (zero when it has none, or none was read).
func serversStableSince(in Input) time.Time {
	var latest time.Time
	if in.Host == nil {
		return latest
	}
	for _, srv := range in.Host.Servers {
		if s, ok := in.Clusters[ClusterKey(srv)].Server(srv.ID); ok && s.StableSince.After(latest) {
			latest = s.StableSince
		}
	}
	return latest
}

// nodeCameBack: the node missed heartbeats (went down or disconnected) after its
// drain completed and is ready again. An agent deployed as a Nomad system job
// may not be able to report its new boot ID before that: on a node that went down
// its allocation was lost and Nomad places no new one on an ineligible node, so
// this is how the coordinator learns the reboot happened. It counts only once the
// agent announced the reboot: a node cut off by the network and back, with no
// reboot, must not pass for a rebooted host.
func nodeCameBack(n *NodeView, p store.Plan) bool {
	if n == nil || p.DrainedIndex == 0 || n.Status != "ready" {
		return false
	}
	return max(n.ReregisteredIndex, n.MissedHeartbeatIndex) > p.DrainedIndex
}

// Input is everything the phase machine looks at for one host.
type Input struct {
	Now  time.Time
	Plan store.Plan // zero Phase means idle
	Host *store.HostRecord
	Node *NodeView // nil: the host runs no Nomad client, or its node is unknown
	// NodeGone says why the node the cycle took out of service (Plan.NodeID)
	// is no longer the host's, from Nomad's node list (NodeGone); "" while it
	// is. Read for hosts out of service only.
	NodeGone string

	Paused    bool
	Request   *store.Request // a manual request for this host
	CancelAt  time.Time      // requests made at or before this are canceled
	ReleaseAt time.Time      // a release was asked at this time

	// Group is the host's group now (its node's); "" keeps the plan's.
	Group string
	// Admitted: the group has a free slot for this host, its window allows a
	// drain to start now and its servers' gates pass (admit.go).
	Admitted bool
	// NotAdmitted says why admission left the host waiting (zero: no reason
	// given, the host waits for a slot or its window).
	NotAdmitted WaitReason
	// NewGrantID is the ID to use if the host is granted a slot now.
	NewGrantID string
	// SystemJobs are the system jobs running on the node now (recorded at grant).
	SystemJobs []string
	// ServerGates: the host runs servers and their quorum gates are evaluated by
	// the caller (Admitted already includes the pre-reboot gates). Without it a
	// server host is never granted.
	ServerGates bool
	// Cordon: admission wants the node of this pending host, next in line,
	// ineligible before its drain; NoCordon: why a host next in line is not
	// cordoned (cordon.go).
	Cordon   bool
	NoCordon string
	// Leads are the products whose leader (the active node, for Vault) runs on
	// this host: leadership is handed over before the host may reboot.
	Leads []string
	// HandOverBlocked says why the hand-over cannot be done (zero when it can).
	HandOverBlocked WaitReason
	// Clusters: the health of the server clusters the pass read (nil: none),
	// by cluster key; a host without a node is seen back through them.
	Clusters map[string]health.ClusterHealth
	// PostGate says why the host's servers are not back yet (zero when they
	// are), and PostGateRecheck when it may open with nothing else changing:
	// a server's StableSince plus server_stable_for, or the next look at the
	// clusters' health, which nothing watches.
	PostGate        WaitReason
	PostGateRecheck time.Time

	Timing Timing
	// MaxUptime is the max_uptime of the host's group (0: none): a host up
	// longer (its jitter added) needs a reboot (uptime.go).
	MaxUptime time.Duration

	// Drain and Healthy are the options of the host's group; Health is what
	// was observed of its workloads while it rejoins (nil: not read this pass).
	// See rejoin.go.
	Drain   DrainOptions
	Healthy rejoin.Settings
	Health  *rejoin.Observed

	// ApprovedBy: who approved the host admission admits now, in a group
	// that needs an approval (package admission, approval.go); ApprovalUntil:
	// the end of the operator's approval it used (zero: the webhook's).
	ApprovedBy    string
	ApprovalUntil time.Time
}

// Decision is what to do for one host.
type Decision struct {
	Plan  store.Plan // the next plan
	Write bool       // Plan differs from the input plan and must be stored first

	StartDrain   bool // start (or re-issue) the drain for Plan.GrantID
	CancelDrain  bool // cancel the drain
	MarkEligible bool // with CancelDrain: mark the node eligible (it was before)
	SetEligible  bool // mark the node eligible (it was before rollboot touched it)
	// Cordon: mark the node ineligible, after the plan that records the
	// cordon is stored (cordon.go).
	Cordon bool
	// HandOver: hand over the leadership of these products before the reboot.
	HandOver []string

	History      *store.HistoryRecord // a finished cycle to record
	ClearRequest bool                 // the manual request is done
	ClearRelease bool                 // the release was carried out
	// DeletePlan: the host is gone (forgotten): delete its idle plan.
	DeletePlan bool

	// Waiting says why the host is not moving; Plan.Waiting holds its text
	// unless the host is simply on its way (WaitReason.Stored).
	Waiting WaitReason
	// Event is a one-line description of a transition, for logs: a fixed text
	// (the variable parts are the plan's Reason, LastError and Waiting, logged
	// as attributes beside it).
	Event string
	// ClearCancel: the host's cancel suppresses nothing any more (the host is
	// idle and no need or request made at or before it is left): it is
	// removed from the control state, so that cancels do not pile up.
	ClearCancel bool
	// RecheckAt is when this decision can change with nothing else changing
	// (a backoff's end, a drain, rejoin or healthy deadline; zero: never): the
	// loop runs a pass then.
	RecheckAt time.Time
	// Unhealthy: the cycle ends past the healthy deadline with these workloads
	// still unhealthy (healthy.on_deadline = "release"): alerted.
	Unhealthy string
	// ClearApproval: the cycle ended, and with it the operator's approval
	// that let it start, valid until this time: it is removed from the
	// control state (zero: none to remove).
	ClearApproval time.Time
	// Failure: the decision fails the host's cycle this way, for the failure
	// budgets (policy.Record); "" when it does not. Set where the cycle turns
	// stuck, its reboot failed, it ends with its workloads unhealthy, or its
	// drain is aborted at its deadline.
	Failure policy.FailureKind
}

// Need is the host's current reboot request, if any: the earliest of the agent's
// detection and a manual request that a cancel did not suppress. A cancel
// suppresses what was made at or before it, each on its own: a request made
// after a cancel stands, though the agent's earlier detection stays canceled.
func Need(in Input) (at time.Time, reason string, ok bool) {
	live := func(t time.Time) bool { return in.CancelAt.IsZero() || t.After(in.CancelAt) }
	stale := in.Host != nil && in.Plan.GoneBootID != "" && in.Host.BootID == in.Plan.GoneBootID
	if in.Host != nil && in.Host.RebootRequired && !stale && live(in.Host.RequestedAt) {
		at, reason, ok = in.Host.RequestedAt, in.Host.Reason, true
	}
	if in.Request != nil && live(in.Request.At) && (!ok || in.Request.At.Before(at)) {
		at, ok = in.Request.At, true
		reason = "manual request"
		if in.Request.Reason != "" {
			reason += ": " + in.Request.Reason
		}
	}
	return at, reason, ok
}

// Step decides the next move for one host. Its decision is final: the plan it
// returns is the one to store, with the host's group and why it waits.
func Step(in Input) Decision {
	d := step(in)
	if in.Group != "" && (d.Plan.Phase == store.PhasePending || d.StartDrain) {
		d.Plan.Group = in.Group
	}
	if in.Plan.Phase == store.PhasePending && d.Plan.Active() {
		d.Plan.Fingerprint = grantFingerprint(in) // for the history record: the cycle's wave
	}
	if w := d.Waiting.Stored(); d.Plan.Waiting != w && (d.Write || in.Plan.Phase != store.PhaseIdle) {
		// Keep a hold's reason in the plan for `rollboot status`; it changes
		// rarely, so this adds few writes (wait.go, progress).
		d.Plan.Waiting, d.Write = w, true
		d.Plan.WaitingKind = ""
		if w != "" {
			d.Plan.WaitingKind = d.Waiting.Kind.Name() // the status page counts the holds by kind
		}
	}
	d.ClearCancel = cancelDone(in, d.Plan)
	d.RecheckAt = recheckAt(in, d.Plan)
	approvalKept(in, &d)
	return d
}

// approvalKept keeps the plan's approval fields: since when the host awaits
// approval (set when it begins, cleared when it stops), and the approval of
// a cycle, forgotten (and the operator's consumed) when the cycle ends.
func approvalKept(in Input, d *Decision) {
	awaiting := d.Waiting.Kind == WaitAwaitingApproval
	switch {
	case awaiting && d.Plan.AwaitingSince.IsZero():
		d.Plan.AwaitingSince, d.Write = in.Now, true
		if d.Event == "" {
			d.Event = "awaiting approval" // what approves it: in Waiting
		}
	case !awaiting && !d.Plan.AwaitingSince.IsZero():
		d.Plan.AwaitingSince, d.Write = time.Time{}, true
	}
	if d.Plan.Phase == store.PhaseIdle && (d.Plan.ApprovedBy != "" || !d.Plan.ApprovalUntil.IsZero()) {
		d.ClearApproval = d.Plan.ApprovalUntil
		d.Plan.ApprovedBy, d.Plan.ApprovalUntil, d.Write = "", time.Time{}, true
	}
}

// needed is the host's current need (Need).
type needed struct {
	at     time.Time
	reason string
	ok     bool
	// uptimeBoot: the need is the host's uptime (max_uptime) in the boot
	// that began then; zero for any other need.
	uptimeBoot time.Time
}

// step is the phase machine proper: one function per phase.
func step(in Input) Decision {
	p := in.Plan
	if p.Phase == "" {
		p.Phase = store.PhaseIdle
	}
	d := Decision{Plan: p}
	if p.Phase == store.PhaseUnreadable {
		// A newer rollboot wrote the plan: hold the host, change nothing.
		d.Waiting = WaitFor(WaitPlanUnreadable, p.Waiting)
		return d
	}
	n := needOf(in)

	if !in.ReleaseAt.IsZero() {
		// A release applies to the cycle under way when it was asked; an old one
		// left behind must not cut a later cycle short.
		if p.Active() && !in.ReleaseAt.Before(p.Timeline[store.PhasePending]) {
			return release(in, d)
		}
		d.ClearRelease = true // nothing held: the release is moot
	}
	if r, ok := staleDrain(in, d); ok {
		return r
	}
	r := cordon(in, stepPhase(in, d, n))
	if p.Active() {
		return watchNodeGone(in, d, r)
	}
	return r
}

// stepPhase decides for the host's phase.
func stepPhase(in Input, d Decision, n needed) Decision {
	p := d.Plan
	switch p.Phase {
	case store.PhaseIdle:
		return stepIdle(in, d, n)
	case store.PhasePending:
		if r, ok := rebootedAnyway(in, d); ok {
			return r
		}
		return stepPending(in, renewNeed(d, n), n)
	case store.PhaseDraining:
		return stepDraining(in, d, n)
	case store.PhaseDrained:
		return stepDrained(in, d)
	case store.PhaseRebooting:
		return stepRebooting(in, d)
	case store.PhaseRejoining:
		return stepRejoining(in, d)
	case store.PhaseStuck:
		return stepStuck(in, d)
	case store.PhaseBackoff:
		if r, ok := rebootedAnyway(in, d); ok {
			return r
		}
		return stepBackoff(in, d, n)
	}
	d.Waiting = WaitFor(WaitUnknownPhase, p.Phase)
	return d
}

// staleDrain gives back a node that a drain of rollboot's holds while no cycle
// of its host does: the host is idle, pending or backing off. A coordinator
// stopped between its lease check and its drain call can send the drain after
// its successor ended the grant (nothing in Nomad's drain API fences it); an
// abort or a cancel whose drain cancel failed after its plan was stored leaves
// one too. Left alone, the node would stay ineligible with nothing to give it
// back. A drain still running is canceled; one that completed (a node with
// nothing to move completes at once) leaves the node ineligible, which is
// undone. Eligibility comes back when the drain's meta says the node was
// eligible before it, or the plan still knows its grant's (a backoff after an
// abort).
func staleDrain(in Input, d Decision) (Decision, bool) {
	n, p := in.Node, d.Plan
	if !IsStaleDrain(n, p) {
		return d, false
	}
	restore := n.DrainRestores || n.DrainGrant == p.GrantID && p.EligibleBefore
	if n.Draining {
		d.CancelDrain, d.MarkEligible = true, restore
	} else if d.SetEligible = restore; !restore {
		return d, false // completed, and the node was not eligible before it: nothing to give back
	}
	d.Event = "gave back a node that a drain no cycle holds took out"
	return d, true
}

// IsStaleDrain reports whether n is taken out by a drain of rollboot's that no
// cycle of p's host holds: draining, or a completed drain that left it
// ineligible, begun after the host's last cycle ended (the drain of that cycle
// began before its end, and the cycle gave the node back: an operator who made
// the node ineligible since is not overruled). Nomad's clock dates the drain,
// the coordinator's the cycle's end: they are assumed within a cycle's length.
func IsStaleDrain(n *NodeView, p store.Plan) bool {
	if n == nil || n.DrainGrant == "" {
		return false // no drain, or not by rollboot (a foreign drain holds)
	}
	switch p.Phase {
	case store.PhaseIdle, store.PhasePending, store.PhaseBackoff, "":
	default:
		return false
	}
	if n.Draining {
		return true
	}
	return !n.Eligible && n.DrainStatus == "complete" && n.DrainStartedAt.After(p.LastCompleted)
}

// stepIdle: a need makes the host pending, unless it is the need its last reboot
// did not clear (a reboot loop), which is held with a backoff.
func stepIdle(in Input, d Decision, n needed) Decision {
	p := d.Plan
	if !n.ok {
		d.DeletePlan = forgotten(in)
		// A host first seen (a record the pass uses, no stored plan) gets an
		// idle plan: its agent's watch then waits on a variable that exists,
		// which Nomad wakes only at its writes (store/absent.go).
		d.Write = in.Host != nil && p.ModifyIndex == 0
		return d
	}
	d.Plan = enter(p, store.PhasePending, in.Now)
	d.Plan.Timeline = map[string]time.Time{store.PhasePending: in.Now}
	d.Plan.RequestedAt, d.Plan.Reason, d.Plan.UptimeBootedAt = n.at, n.reason, n.uptimeBoot
	d.Plan.Attempt, d.Plan.GrantID, d.Plan.NextTry, d.Plan.LastError = 0, "", time.Time{}, ""
	if isLoop(in, p) {
		d.Plan.LoopCount = p.LoopCount + 1
		d.Plan.NextTry = p.LastCompleted.Add(policy.Backoff(in.Timing.LoopBackoff, in.Timing.LoopMaxBackoff, d.Plan.LoopCount))
		d.Plan.LastError = fmt.Sprintf("reboot loop: a reboot is still needed right after reboot %d; holding until %s",
			d.Plan.LoopCount, d.Plan.NextTry.UTC().Format(time.RFC3339))
		d.Event = "reboot loop detected"
	} else {
		d.Plan.LoopCount = 0
		d.Event = "reboot requested" // why: in Reason
	}
	d.Write = true
	return d
}

// stepPending: a pending host is granted once nothing holds it and admission
// gave it a slot.
func stepPending(in Input, d Decision, n needed) Decision {
	p := d.Plan
	if !n.ok {
		return withdrawn(in, d)
	}
	if in.Now.Before(p.NextTry) {
		d.Waiting = WaitFor(WaitBackoff, p.NextTry.UTC().Format(time.RFC3339))
		if p.LastError != "" {
			d.Waiting = WaitFor(WaitRebootLoop, p.LastError)
		}
		return d
	}
	if in.Paused {
		d.Waiting = WaitFor(WaitPaused, "")
		return d
	}
	if in.Host == nil {
		d.Waiting = WaitFor(WaitNoRecord, "")
		return d
	}
	if role := ServerRole(in.Host.Roles); role != "" && !in.ServerGates {
		// Rebooting a server is safe only behind quorum gates (invariant 2),
		// which this version does not have: never take a server out.
		d.Waiting = WaitFor(WaitServerNoGates, role)
		return d
	}
	if why := NodeHoldOf(in.Node, p); !why.IsZero() {
		d.Waiting = why
		return d
	}
	if !in.Admitted {
		d.Waiting = in.NotAdmitted
		if d.Waiting.IsZero() {
			d.Waiting = WaitFor(WaitSlot, "")
		}
		return d
	}
	if why := AgentWouldBeLost(in); !why.IsZero() {
		d.Waiting = why
		return d
	}
	if why := systemDrainHold(in); !why.IsZero() {
		d.Waiting = why
		return d
	}
	// The need may have changed while the host waited (a newer update, a
	// package need overtaking max_uptime): the grant says what this reboot
	// is for now, as its history record and its wave will; its place in
	// line (RequestedAt) stays.
	d.Plan.Reason, d.Plan.UptimeBootedAt = n.reason, n.uptimeBoot
	return grant(in, d)
}

// NodeHold says why a pending host's node holds it whatever admission says
// (zero when it does not): the node is not ready, someone else drains it, or a
// drain rollboot did not start left it ineligible. That node is the
// operator's: a grant would drain it again for rollboot, and the agent, if
// that drain stopped it (ignore_system_jobs = false), would not come back to
// reboot it while the node stays ineligible. The operator gives it back by
// making it eligible; then the host goes on.
func NodeHold(n *NodeView) WaitReason {
	switch {
	case n == nil:
		return WaitReason{}
	case n.Status != "ready":
		return WaitFor(WaitNodeNotReady, n.Status)
	case n.Draining && n.DrainGrant == "":
		return WaitFor(WaitForeignDrain, "")
	case !n.Eligible && n.DrainGrant == "" && n.DrainStatus != "":
		return WaitFor(WaitForeignIneligible, foreignDrainDetail(n))
	}
	return WaitReason{}
}

// grant gives the host its slot: the plan records the grant, the node's
// eligibility and its system jobs, and the drain starts once it is stored.
func grant(in Input, d Decision) Decision {
	p := d.Plan
	// Each attempt has a timeline of its own after the time the host was
	// queued: a retried one keeping its predecessor's draining, drained or
	// rejoining times would date its drain, its reboot and its rejoin from
	// the failed attempt (the foreign-drain check, a stuck rejoin, history).
	p.Timeline = map[string]time.Time{}
	if at, ok := d.Plan.Timeline[store.PhasePending]; ok {
		p.Timeline[store.PhasePending] = at
	}
	d.Plan = enter(p, store.PhaseDraining, in.Now)
	d.Plan.GrantID = in.NewGrantID
	d.Plan.Attempt = p.Attempt + 1
	d.Plan.DrainStarts = policy.RecentStarts(p.DrainStarts, in.Now) // the rollout's max_drains_per_hour
	d.Plan.BootIDAtGrant = in.Host.BootID
	d.Plan.ServersStableSince = serversStableSince(in)
	d.Plan.ManualRequest = in.Request != nil && in.Request.At.Equal(p.RequestedAt)
	d.Plan.LastError = ""
	d.Plan.Forced = false
	d.Plan.ApprovedBy, d.Plan.ApprovalUntil = in.ApprovedBy, in.ApprovalUntil
	d.Write = true
	if in.Node == nil {
		// A host without a Nomad client has nothing to drain.
		d.Plan.NodeID, d.Plan.EligibleBefore, d.Plan.SystemJobs = "", false, nil
		if len(in.Leads) > 0 {
			d.Event = "granted (no Nomad node to drain): handing over leadership"
			return d
		}
		d.Plan = enter(d.Plan, store.PhaseDrained, in.Now)
		d.Event = "granted (no Nomad node to drain)"
		return d
	}
	d.Plan.NodeID = in.Node.ID
	// Not draining: staleDrain cancels any drain of ours first. A node
	// ineligible by the host's own cordon was eligible before it (cordon.go):
	// the cordon becomes part of the drain.
	d.Plan.EligibleBefore = in.Node.Eligible || CordonHolds(in.Node, p)
	d.Plan.CordonedAt, d.Plan.CordonNode, d.Plan.NoCordon = time.Time{}, "", ""
	d.Plan.SystemJobs = in.SystemJobs
	d.StartDrain = true
	d.Event = "granted: draining"
	return d
}

// stepDraining waits for the drain to complete (then for the leadership
// hand-over), re-issues a drain that did not land, and aborts one that is
// canceled or runs too long.
func stepDraining(in Input, d Decision, n needed) Decision {
	p := d.Plan
	if in.Node == nil && p.NodeID == "" {
		// No node to drain: only the leadership hand-over is left.
		if len(in.Leads) > 0 {
			return handOver(in, d)
		}
		d.Plan = enter(p, store.PhaseDrained, in.Now)
		d.Write, d.Event = true, "ready to reboot"
		return d
	}
	if in.Node == nil {
		d.Waiting = WaitFor(WaitNodeNotFound, "")
		return d
	}
	if !n.ok {
		// Canceled by the operator (or no longer needed) while draining: undo
		// the drain, restoring eligibility, and go idle.
		d.CancelDrain, d.MarkEligible, d.Plan = true, p.EligibleBefore, finish(p, in.Now)
		d.Write, d.Event = true, "canceled while draining"
		d.History = history(p, in, "canceled")
		return d
	}
	ours := in.Node.DrainGrant == p.GrantID
	taken := ""
	if !ours {
		taken = takenBack(in, p)
	}
	switch {
	case !in.Node.Draining && ours && in.Node.DrainStatus == "complete" && len(in.Leads) > 0:
		// Drained; the host still leads a cluster: hand over before the reboot.
		return handOver(in, d)
	case !in.Node.Draining && ours && in.Node.DrainStatus == "complete":
		d.Plan = enter(p, store.PhaseDrained, in.Now)
		d.Plan.Forced = in.Timing.ForceOnTimeout && in.Now.Sub(p.PhaseSince) >= in.Timing.DrainDeadline
		d.Plan.DrainedIndex = in.Node.ModifyIndex
		d.Write, d.Event = true, "drain complete"
		return d
	case !in.Node.Draining && ours && in.Node.DrainStatus == "canceled":
		// Someone canceled our drain: treat it as a failed attempt.
		return abort(in, d, "the drain was canceled outside rollboot", false)
	case taken != "":
		return interrupted(in, d, taken)
	case !ours:
		// The plan was stored but the drain call did not land (a crash or an
		// error in between): issue it again. Draining is idempotent.
		d.StartDrain = true
		d.Waiting = WaitFor(WaitDrainStarting, "")
		return d
	}
	if !in.Timing.ForceOnTimeout && in.Now.Sub(p.PhaseSince) >= in.Timing.DrainDeadline {
		return abort(in, d, fmt.Sprintf("the drain did not finish within %s", in.Timing.DrainDeadline), true)
	}
	d.Waiting = WaitFor(WaitDraining, "")
	return d
}

// stepDrained waits for the agent to start the reboot.
func stepDrained(in Input, d Decision) Decision {
	p := d.Plan
	if why := takenBack(in, p); why != "" {
		return interrupted(in, d, why)
	}
	if r, ok := drainAgain(in, d); ok {
		return r
	}
	if r, ok := agentReport(in, d); ok {
		return r
	}
	switch ev := rebootSeen(in, p); {
	case ev != "" && notReadyYet(in):
		return awaitReady(in, d, p)
	case ev != "":
		d.Plan = enter(enter(p, store.PhaseRebooting, in.Now), store.PhaseRejoining, in.Now)
		d.Write, d.Event = true, ev
		d, _ = restoreEligibility(in, d)
	case in.Host != nil && in.Host.RebootingGrant == p.GrantID:
		d.Plan = enter(p, store.PhaseRebooting, in.Now)
		d.Write, d.Event = true, "agent started the reboot"
	case in.Now.Sub(p.PhaseSince) >= in.Timing.RejoinTimeout:
		d = toStuck(in, d, p, fmt.Sprintf("the agent did not start the reboot within %s", in.Timing.RejoinTimeout))
	default:
		d.Waiting = WaitFor(WaitAgentReboot, "")
	}
	return d
}

// stepRebooting waits for a sign of the reboot; past its time, a host that
// never went down failed its attempt, and any other is stuck.
func stepRebooting(in Input, d Decision) Decision {
	p := d.Plan
	if why := takenBack(in, p); why != "" {
		return interrupted(in, d, why)
	}
	if r, ok := drainAgain(in, d); ok {
		return r
	}
	if r, ok := agentReport(in, d); ok {
		return r
	}
	switch ev := rebootSeen(in, p); {
	case ev != "" && notReadyYet(in):
		return awaitReady(in, d, p)
	case ev != "":
		d.Plan = enter(p, store.PhaseRejoining, in.Now)
		d.Write, d.Event = true, ev
		d, _ = restoreEligibility(in, d)
	case in.Now.Sub(p.PhaseSince) >= in.Timing.RejoinTimeout && neverWentDown(in, p):
		return notRebooted(in, d, store.RebootFailure{Grant: p.GrantID, Step: store.StepReboot, ExitStatus: -1,
			Message: fmt.Sprintf("the host did not go down within %s (same boot ID, node ready)", in.Timing.RejoinTimeout), At: in.Now})
	case in.Now.Sub(p.PhaseSince) >= in.Timing.RejoinTimeout:
		d = toStuck(in, d, p, fmt.Sprintf("the host did not come back within %s", in.Timing.RejoinTimeout))
	default:
		d.Waiting = WaitFor(WaitRebooting, "")
	}
	return d
}

// notReadyYet reports whether the host's node, back from the reboot (its
// client registered again: rebootSeen), is not ready yet. The rejoin's first
// step waits for it (restoreEligibility, stepRejoining), so the host stays in
// its phase until then: entering the rejoin earlier would be a plan write,
// and a wake of the host's agent, that decides nothing, and in the pass that
// sees the node ready the rejoin gives it back and may close at once, with
// one write.
func notReadyYet(in Input) bool {
	return in.Node != nil && in.Node.Status != "ready"
}

// awaitReady holds a host back from its reboot whose node is not ready yet
// (notReadyYet), stuck once rejoin_timeout has passed since the phase began
// (the reboot, or the drain's end when the reboot was seen from drained).
func awaitReady(in Input, d Decision, p store.Plan) Decision {
	if in.Now.Sub(p.PhaseSince) >= in.Timing.RejoinTimeout {
		return toStuck(in, d, p, fmt.Sprintf("the node was not ready within %s of the reboot", in.Timing.RejoinTimeout))
	}
	d.Waiting = WaitFor(WaitNodeToBeReady, in.Node.Status)
	return d
}

// stepStuck: a stuck host keeps its slot until it comes back, is released, or
// turns out never to have gone down.
func stepStuck(in Input, d Decision) Decision {
	p := d.Plan
	if rebootSeen(in, p) != "" {
		if !p.Timeline[store.PhaseRejoining].IsZero() {
			return stuckRejoin(in, d)
		}
		if notReadyYet(in) {
			d.Waiting = stuckWait(p) // back, but its node not ready yet (awaitReady)
			return d
		}
		// Late, but back: carry on with the rejoin checks.
		d.Plan = enter(p, store.PhaseRejoining, in.Now)
		d.Plan.LastError = ""
		d.Write, d.Event = true, "host is back after being reported stuck"
		return d
	}
	if holdsNoSlotStuck(in) {
		return abandon(in, d, p, p.LastError)
	}
	if neverWentDown(in, p) {
		// Marked stuck, yet the host never went down (its agent stopped
		// before the reboot, say): that is a failed attempt, not a stuck host.
		return notRebooted(in, d, store.RebootFailure{Grant: p.GrantID, Step: store.StepReboot, ExitStatus: -1,
			Message: "the host never went down (same boot ID, node ready)", At: in.Now})
	}
	d.Waiting = stuckWait(p)
	return d
}

// stuckRejoin: a host made stuck by the rejoin checks (its node, its system
// jobs, its servers or its agent were not back in time) stays stuck until those
// checks pass or make progress, and only then carries on. Going back to rejoining
// at once would time out again at once, a plan write and a "stuck" event per
// pass for as long as the check fails.
func stuckRejoin(in Input, d Decision) Decision {
	p := d.Plan
	r := d
	r.Plan.Phase = store.PhaseRejoining
	r = stepRejoining(in, r)
	if r.Plan.Phase != store.PhaseStuck {
		if r.Plan.Phase == store.PhaseRejoining {
			r.Plan = enter(p, store.PhaseRejoining, in.Now) // its rejoin clock keeps running
			r.Plan.LastError = ""
			r.Write, r.Event = true, "host is back after being reported stuck"
		}
		return r
	}
	if r.Plan.LastError != p.LastError {
		// Still stuck, for another reason now: say which.
		d.Plan.LastError, d.Write = r.Plan.LastError, true
	}
	d.Waiting = stuckWait(d.Plan)
	return d
}

// stuckWait is why a stuck host waits: its last error, and how to free its slot.
func stuckWait(p store.Plan) WaitReason {
	return WaitFor(WaitStuck, p.LastError+" (rollboot release "+p.Host+" frees the slot)")
}

// withdrawn returns a waiting host to idle: nothing needs its reboot any more.
func withdrawn(in Input, d Decision) Decision {
	d.Plan = enter(d.Plan, store.PhaseIdle, in.Now)
	d.Write, d.Event = true, "request withdrawn"
	return d
}

// stepBackoff returns the host to pending when its backoff is over.
func stepBackoff(in Input, d Decision, n needed) Decision {
	p := d.Plan
	if !n.ok {
		return withdrawn(in, d)
	}
	if in.Now.Before(p.NextTry) {
		d.Waiting = WaitFor(WaitBackoff, p.NextTry.UTC().Format(time.RFC3339)+": "+p.LastError)
		return d
	}
	d.Plan = enter(p, store.PhasePending, in.Now)
	d.Write, d.Event = true, "retrying"
	return d
}

// handOver asks for the leadership hand-over, unless it is blocked.
func handOver(in Input, d Decision) Decision {
	if !in.HandOverBlocked.IsZero() {
		d.Waiting = in.HandOverBlocked
		return d
	}
	d.HandOver = in.Leads
	d.Waiting = WaitFor(WaitHandingOver, strings.Join(in.Leads, ", "))
	return d
}

// ServerRole returns the first server role in roles, or "".
func ServerRole(roles []string) string {
	for _, r := range roles {
		switch r {
		case store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer:
			return r
		}
	}
	return ""
}

// stepRejoining waits for the node to be ready, restores eligibility and waits for the
// node's system allocations before the slot is freed.
func stepRejoining(in Input, d Decision) Decision {
	p := d.Plan
	since := rejoinSince(p)
	timedOut := in.Now.Sub(since) >= in.Timing.RejoinTimeout
	stuck := func(why string) Decision { return toStuck(in, d, p, why) }
	if in.Node != nil {
		if in.Node.Status != "ready" {
			if timedOut {
				return stuck(fmt.Sprintf("the node was not ready within %s of the reboot", in.Timing.RejoinTimeout))
			}
			d.Waiting = WaitFor(WaitNodeToBeReady, in.Node.Status)
			return d
		}
		if r, ok := restoreEligibility(in, d); ok {
			return r
		}
		if AwaitsReport(in.Host, p, true) {
			// The agent's report is needed anyway (below), and comes once its
			// own system allocation runs: the node's allocations (its system
			// jobs, its workloads' health) are read only after it, one read
			// instead of a watch answering every change of them meanwhile.
			return awaitReport(in, d, timedOut, stuck)
		}
		if p.EligibleBefore {
			// System allocations are placed only on eligible nodes (Nomad's
			// Node.Ready()), so they are checked after eligibility is back.
			for _, job := range p.SystemJobs {
				if !in.Node.SystemRunning[job] {
					if timedOut {
						return stuck(fmt.Sprintf("system job %s did not run again on the node within %s", job, in.Timing.RejoinTimeout))
					}
					d.Waiting = WaitFor(WaitSystemJob, job)
					return d
				}
			}
		}
	}
	if r, held := healthHold(in, &d, since); held {
		return r
	}
	if !in.PostGate.IsZero() {
		// The host's servers must be back in their clusters (Raft member,
		// healthy, stable; Vault unsealed) before the slot is freed.
		if timedOut {
			return stuck(fmt.Sprintf("servers not back within %s: %s", in.Timing.RejoinTimeout, in.PostGate.String()))
		}
		d.Waiting = in.PostGate
		return d
	}
	if AwaitsReport(in.Host, p, in.Node != nil) {
		return awaitReport(in, d, timedOut, stuck)
	}
	return backInService(in, d, p)
}

// AwaitsReport says whether a rejoining host waits for its agent to report the
// reboot (a new boot ID) before its slot is freed: the node came back, but the
// agent has not reported yet (it starts once its system allocation is placed
// again, and runs its post-reboot hooks first). The reboot is done when the
// host says so. On a node that stays ineligible Nomad places no allocation, so
// an agent deployed as a system job cannot come back there: its node's word
// counts. hasNode: the host has a Nomad node. The coordinator reads a
// rejoining node's allocations only once this is over (stepRejoining).
func AwaitsReport(h *store.HostRecord, p store.Plan, hasNode bool) bool {
	return h != nil && reportedBack(h, p) == "" && (p.EligibleBefore || !hasNode)
}

// awaitReport holds a rejoining host for its agent's report (AwaitsReport),
// stuck past its rejoin timeout.
func awaitReport(in Input, d Decision, timedOut bool, stuck func(string) Decision) Decision {
	if timedOut {
		return stuck(fmt.Sprintf("the agent did not report a new boot ID within %s", in.Timing.RejoinTimeout))
	}
	d.Waiting = WaitFor(WaitNewBootID, "")
	return d
}

// restoreEligibility gives a rejoining host's node its eligibility back when
// the node is ready again and was eligible before the cycle: Nomad keeps a
// drained node ineligible across a reboot (state_store.go upsertNodeTxn), and
// only rollboot restores it. It is the first of the rejoin's steps, and the
// only one taken in the decision that sees the reboot (stepDrained,
// stepRebooting): it needs nothing but the node, whereas the checks after it
// (system jobs, workloads' health, servers) are read for rejoining hosts only,
// so they wait for the next pass, or for the same pass's second look once the
// write succeeded (rejoinnow.go). Without it, a node ready by the time its
// host's reboot is seen waited a whole pass more for its eligibility.
func restoreEligibility(in Input, d Decision) (Decision, bool) {
	n := in.Node
	if n == nil || n.Status != "ready" || n.Eligible || !d.Plan.EligibleBefore {
		return d, false
	}
	if n.Draining {
		d.CancelDrain, d.MarkEligible = true, true
	} else {
		d.SetEligible = true
	}
	d.Waiting = WaitFor(WaitEligibility, "")
	return d, true
}

// backInService closes the cycle of a host that rebooted and is back: its
// history record, and its plan idle with what the reboot-loop guard and the
// back_in_service notification need.
func backInService(in Input, d Decision, p store.Plan) Decision {
	d.History = history(p, in, "rebooted")
	d.Plan = finish(p, in.Now)
	d.Plan.GoneBootID, d.Plan.LastAfterBootID = "", ""
	if in.Host != nil && in.Host.BootID != p.BootIDAtGrant {
		d.Plan.LastAfterBootID = in.Host.BootID
	} else if in.Host != nil {
		// Done on the node's word: the agent has not reported since the reboot.
		d.Plan.GoneBootID = p.BootIDAtGrant
	}
	d.Plan.LastCompleted = in.Now
	if d.Unhealthy != "" {
		d.History.Error = unhealthyReleased + d.Unhealthy
		d.Failure = policy.FailUnhealthy
	}
	d.Plan.LastUnhealthy = d.Unhealthy
	d.Plan.LastNeedAt, d.Plan.LoopCount = loopAfterCycle(in, p)
	d.ClearRequest = in.Request != nil && !in.Request.At.After(p.Timeline[store.PhaseDraining])
	d.Write, d.Event = true, "rebooted and back in service"
	return d
}

// unhealthyReleased begins the history's error of a cycle whose slot was freed
// at the healthy deadline with its workloads unhealthy.
const unhealthyReleased = "slot freed at the healthy deadline with workloads unhealthy: "

// abort cancels the drain, restores eligibility and backs off before a retry.
func abort(in Input, d Decision, why string, cancel bool) Decision {
	p := d.Plan
	d.CancelDrain, d.MarkEligible = cancel, cancel && p.EligibleBefore
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = why
	if !cancel && p.EligibleBefore && in.Node != nil && !in.Node.Eligible {
		d.SetEligible = true
	}
	d.Write, d.Event = true, "drain aborted" // why: in LastError
	if cancel {
		d.Failure = policy.FailDrainAborted // its deadline; a drain canceled by someone else is no failure of the host
	}
	return d
}

// release frees a host's slot by hand (`rollboot release`), undoing the drain.
func release(in Input, d Decision) Decision {
	p := d.Plan
	if in.Node != nil {
		if in.Node.Draining {
			d.CancelDrain, d.MarkEligible = true, p.EligibleBefore
		} else if p.EligibleBefore && !in.Node.Eligible {
			d.SetEligible = true
		}
	}
	d.History = history(p, in, "released")
	d.Plan = finish(p, in.Now)
	d.ClearRelease = true
	d.ClearRequest = in.Request != nil
	d.Write, d.Event = true, "released by hand"
	return d
}

func history(p store.Plan, in Input, outcome string) *store.HistoryRecord {
	h := &store.HistoryRecord{
		Host: p.Host, Group: p.Group, GrantID: p.GrantID, Outcome: outcome, Reason: p.Reason,
		BootIDBefore: p.BootIDAtGrant, Forced: p.Forced, Finished: in.Now, ApprovedBy: p.ApprovedBy, Fingerprint: p.Fingerprint,
		Timeline: map[string]time.Time{},
	}
	for k, v := range p.Timeline {
		h.Timeline[k] = v
	}
	h.Timeline[store.PhaseIdle] = in.Now
	if in.Request != nil && in.Request.At.Equal(p.RequestedAt) {
		h.RequestedBy = in.Request.By // the need was this request (Need)
	}
	if in.Host != nil {
		h.BootIDAfter = in.Host.BootID
	}
	return h
}

// finish returns the plan of a host whose cycle ended.
func finish(p store.Plan, now time.Time) store.Plan {
	n := enter(p, store.PhaseIdle, now)
	n.GrantID, n.Attempt, n.BootIDAtGrant, n.SystemJobs = "", 0, "", nil
	n.NextTry, n.LastError, n.Forced, n.EligibleBefore, n.DrainedIndex = time.Time{}, "", false, false, 0
	n.Held, n.NodeGoneSince, n.Fingerprint = false, time.Time{}, ""
	return n
}

// grantFingerprint is the fingerprint of the need a grant answers, as the
// host's record claims it ("" when the record claims no need).
func grantFingerprint(in Input) string {
	if in.Host == nil || !in.Host.RebootRequired {
		return ""
	}
	return in.Host.Fingerprint
}

// enter moves p to phase at now and records the first entry in the timeline.
func enter(p store.Plan, phase string, now time.Time) store.Plan {
	p.Phase, p.PhaseSince = phase, now
	tl := make(map[string]time.Time, len(p.Timeline)+1)
	for k, v := range p.Timeline {
		tl[k] = v
	}
	if _, ok := tl[phase]; !ok {
		tl[phase] = now
	}
	p.Timeline = tl
	return p
}

// isLoop: the need that the host still showed right after rollboot's last reboot
// of it (the agent's first detection after the new boot) is still there, and the
// host has not booted since: the reboot did not clear the need (a reboot loop). A
// need first seen later, even in the same boot, is a new need.
func isLoop(in Input, p store.Plan) bool {
	if in.Host == nil || !in.Host.RebootRequired || p.LastAfterBootID == "" || p.LastNeedAt.IsZero() {
		return false
	}
	if in.Request != nil && in.Request.At.After(p.LastCompleted) {
		return false // an operator asked again: that is a new request
	}
	// A need's RequestedAt is stable while it lasts (the agent's clock on both
	// sides), so a later need has a later one.
	return in.Host.BootID == p.LastAfterBootID && !in.Host.RequestedAt.After(p.LastNeedAt)
}

// loopAfterCycle arms the reboot-loop guard when a reboot cycle ends: the need the
// host's record shows for its new boot (zero if none), and the loop count, reset
// by a clean cycle (the reboot cleared the need).
func loopAfterCycle(in Input, p store.Plan) (time.Time, int) {
	if in.Host == nil || in.Host.BootID == p.BootIDAtGrant || !in.Host.RebootRequired {
		return time.Time{}, 0
	}
	return in.Host.RequestedAt, p.LoopCount
}

// neverWentDown: past its time to come back, the host provably did not reboot for
// this grant: its agent reports the boot ID it had at grant and its node is ready
// with no sign of a reboot since the drain. A host that went down has its node
// marked down or disconnected long before rejoin_timeout (Nomad's heartbeat TTL,
// at most the failover TTL of 5 minutes), so a ready node with the same boot ID
// means the reboot never started. Hosts without a node cannot show this: they stay
// stuck until they are back or released, and so do FleetLock hosts: a client that
// was told it may reboot can still do so at any time, so its slot is not taken back.
func neverWentDown(in Input, p store.Plan) bool {
	return p.GrantID != "" && in.Node != nil && in.Node.Status == "ready" && in.Host != nil &&
		!slices.Contains(in.Host.Roles, store.RoleFleetLock) &&
		in.Host.BootID == p.BootIDAtGrant && rebootSeen(in, p) == ""
}

func ClusterKey(srv store.Server) string { return srv.Product + "/" + srv.Cluster }

// Changes reports whether applying d writes anything.
func (d Decision) Changes() bool {
	return d.Write || d.StartDrain || d.CancelDrain || d.SetEligible || d.Cordon || d.ClearRequest ||
		d.ClearRelease || d.History != nil || len(d.HandOver) > 0 || d.DeletePlan
}

package store

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Phases of one host, owned by the coordinator.
const (
	PhaseIdle      = "idle"
	PhasePending   = "pending"
	PhaseDraining  = "draining"
	PhaseDrained   = "drained"
	PhaseRebooting = "rebooting"
	PhaseRejoining = "rejoining"
	PhaseBackoff   = "backoff"
	PhaseStuck     = "stuck"

	// PhaseUnreadable is no phase of the machine and is never stored: it stands
	// for a plan written by a newer rollboot, with a schema this one does not
	// know (PlansChecked). Its host is held: it counts as holding a slot of its
	// group, the coordinator decides nothing for it, and PutPlan refuses to
	// overwrite its plan.
	PhaseUnreadable = "unreadable"
)

// Roles a host can have.
const (
	RoleNomadClient  = "nomad-client"
	RoleNomadServer  = "nomad-server"
	RoleConsulServer = "consul-server"
	RoleVaultServer  = "vault-server"
	// RoleCandidate: the host's agent stands for election as the coordinator.
	RoleCandidate = "coordinator-candidate"
	// RoleFleetLock: the host takes part through the FleetLock protocol (no agent).
	RoleFleetLock = "fleetlock"
)

// HostRecord is what a host's agent publishes about its host.
type HostRecord struct {
	Host     string
	NodeID   string // Nomad node ID; "" when the host runs no Nomad client
	Hostname string
	Roles    []string
	BootID   string
	// BootedAt is when the host booted (the kernel's boot time); zero when the
	// agent cannot tell. A host's claim: it can make only its own uptime need
	// (max_uptime), which its agent checks before it reboots.
	BootedAt time.Time

	RebootRequired bool
	Reason         string    // why a reboot is needed ("sentinel file /var/run/reboot-required")
	RequestedAt    time.Time // when the current need was first seen; stable while it lasts
	// Fingerprint names what the reboot installs (the detectors' fingerprints:
	// a hash of the packages waiting for it, the kernel version it boots);
	// "" when no detector can tell. A changed fingerprint is a new need.
	Fingerprint string

	// RebootingGrant is the grant the agent is rebooting for: set right before the
	// reboot, so the coordinator knows the reboot began.
	RebootingGrant string
	// RebootedGrant is the grant a FleetLock client reported itself back from
	// (steady-state after the reboot it was told it may do): the FleetLock
	// server sets it, since it cannot see the client's boot ID, and the
	// coordinator takes it as the reboot of that grant being seen.
	RebootedGrant string
	FleetLockID   string
	// Servers are the Nomad, Consul and Vault servers that run on the host.
	Servers []Server
	// VaultSealed: the host's Vault server is sealed (after a reboot, until an
	// operator or auto-unseal unseals it).
	VaultSealed bool
	// Group is the rollboot group of a host without a Nomad node (a FleetLock
	// client names it); hosts with a node are grouped by the groups' filters.
	Group        string
	AgentVersion string
	DetectError  string // last detector error (never a reason to reboot)
	// DiscoverError says why the agent cannot tell which servers run on the host
	// (a local agent that does not answer, a failed DNS lookup). While it is set
	// the host's Roles and Servers may be incomplete: the coordinator admits no
	// reboot of it.
	DiscoverError string
	// AgentJob is the Nomad system job the agent runs as ("<namespace>/<job>",
	// from NOMAD_NAMESPACE and NOMAD_JOB_ID); "" when it runs as a service.
	AgentJob string

	// HoldReason says why the agent holds the reboot of RebootingGrant at its
	// final go/no-go (the slot stays taken and the agent checks again); "" when
	// it does not hold.
	HoldReason string
	// Failure is the last failed reboot attempt, for the grant it names.
	Failure *RebootFailure

	ModifyIndex uint64
}

// Failed steps of a reboot attempt.
const (
	StepPreHook = "pre-reboot hook"
	StepReboot  = "reboot command"
)

// RebootFailure is a reboot attempt that failed on the host: the host did not go
// down, and the agent says which step failed and how.
type RebootFailure struct {
	Grant      string
	Step       string // StepPreHook or StepReboot
	ExitStatus int    // the command's exit status; -1 when it did not exit (not started, killed, timed out)
	Message    string // the command and the first line of its stderr, capped
	At         time.Time
}

// String describes the failure in one line.
func (f RebootFailure) String() string {
	if f.ExitStatus >= 0 {
		return fmt.Sprintf("%s failed (exit status %d): %s", f.Step, f.ExitStatus, f.Message)
	}
	return fmt.Sprintf("%s failed: %s", f.Step, f.Message)
}

// Server is one server on a host: the product ("nomad", "consul", "vault"), its
// cluster (Nomad region, Consul datacenter, Vault cluster name) and its Raft ID.
type Server struct {
	Product string `json:"product"`
	Cluster string `json:"cluster"`
	ID      string `json:"id"`
}

// OutcomeNodeGone is the outcome of a cycle whose slot was released because
// its node was gone from Nomad (purged, or replaced by another node).
const OutcomeNodeGone = "node_gone"

// NodeGonePrefix begins the last error of a plan backing off after its node
// was gone: the node_gone notification is told from it.
const NodeGonePrefix = "node gone: "

// Plan is the coordinator's record of one host.
type Plan struct {
	Host       string
	Phase      string
	PhaseSince time.Time
	Group      string
	Reason     string

	// The current request and grant.
	RequestedAt    time.Time
	GrantID        string
	Attempt        int  // drain attempts for the current request
	EligibleBefore bool // the node was eligible before rollboot touched it
	BootIDAtGrant  string
	NodeID         string
	SystemJobs     []string // system jobs that ran on the node at grant time
	NextTry        time.Time
	LastError      string
	Waiting        string               // why the host is not moving, as the coordinator last saw it
	WaitingKind    string               // its kind (phase.WaitKind.Name), written with it
	Timeline       map[string]time.Time // first time each phase was entered for this grant
	Forced         bool                 // the drain hit its deadline and was forced
	// DrainedIndex is the node's ModifyIndex when its drain completed: a "Node
	// re-registered" event after it proves the host went down and came back.
	DrainedIndex uint64
	// ServersStableSince is the latest StableSince of the host's servers, as
	// their clusters reported it at grant: a later one shows a server that
	// left and rejoined its cluster since (autopilot restarts it when the
	// server's health changes), the sign of a reboot of a host without a
	// Nomad node.
	ServersStableSince time.Time
	// ManualRequest: the need this grant answers is a request (rollboot
	// request, FleetLock), not the host's own detection. An agent that sees
	// no need of its own refuses a grant that is not a request: the record
	// that asked for it may be another host's forgery.
	ManualRequest bool
	// Fingerprint is what its record said the reboot installs when the cycle
	// was granted (the host's claim: its wave), for the history record.
	Fingerprint string
	// UptimeBootedAt: the need this grant answers is the host's uptime
	// (max_uptime) in the boot that began at this time, as its record said;
	// zero for any other need. The agent refuses the grant unless its own
	// boot time is this one.
	UptimeBootedAt time.Time

	// GoneBootID is a boot the host is known to have left (its node re-registered)
	// while its agent has not reported since: what its record says of that boot,
	// including a reboot need, is stale.
	GoneBootID string

	// Held: the agent holds the reboot at its final go/no-go (the slot stays
	// taken); when the hold ends, the time to come back counts from then.
	Held bool

	// NodeGoneSince is when the coordinator first saw the node this cycle took
	// out of service (NodeID) gone from Nomad: purged, or its name taken by
	// another node. Zero while it is the host's node. The slot is released
	// once it has been gone for coordinator.purged_node_grace.
	NodeGoneSince time.Time

	// CordonedAt is when the coordinator marked the pending host's node
	// (CordonNode) ineligible because its turn is near (node_meta.cordon_next),
	// before it did: the node was eligible then, and is made eligible again
	// when the host leaves the line without a drain. Zero: no cordon of
	// rollboot's. At the grant the cordon becomes part of the drain
	// (EligibleBefore), and these are cleared.
	CordonedAt time.Time
	CordonNode string
	// NoCordon says why the host next in line has no cordon (the capacity
	// gate cannot spare its node); "" otherwise.
	NoCordon string
	// DrainStarts are when the host's drains of the last hour began (its grants),
	// kept at each grant: the rollout's max_drains_per_hour counts them over
	// every plan.
	DrainStarts []time.Time

	// The last finished reboot, for the reboot-loop guard.
	LastAfterBootID string
	LastCompleted   time.Time
	// LastUnhealthy: the workloads still unhealthy when the last finished
	// reboot's slot was freed at its healthy deadline (healthy.on_deadline =
	// "release"); "" when they were healthy. Its back_in_service says so.
	LastUnhealthy string
	LoopCount     int
	// LastNeedAt is when the need the host still showed as its last reboot
	// finished was first seen (zero: the reboot cleared it): only that same need,
	// not a later one, makes a reboot loop.
	LastNeedAt time.Time

	// ApprovedBy: who approved this cycle in a group with an approval (the
	// operator's token name, or the approval webhook's answer), recorded at
	// grant; ApprovalUntil is the end of the operator's approval it used
	// (zero for the webhook's), removed from the control state when the
	// cycle ends (the approval is consumed by the cycle it approved).
	ApprovedBy    string
	ApprovalUntil time.Time
	// AwaitingSince: since when the host awaits its approval at the head of
	// its group's line (zero: it does not); it keeps its slot for
	// approval.hold_slot from then.
	AwaitingSince time.Time

	ModifyIndex uint64
}

// Approval is an operator's leave for a host to drain though its node runs
// singletons (a group's singletons = "hold"): given by By, valid until Until.
type Approval struct {
	Until time.Time
	By    string
}

// Valid reports whether the approval stands at now.
func (a Approval) Valid(now time.Time) bool { return now.Before(a.Until) }

// Active reports whether the host holds a slot of its group (is out of service).
func (p Plan) Active() bool {
	switch p.Phase {
	case PhaseDraining, PhaseDrained, PhaseRebooting, PhaseRejoining, PhaseStuck, PhaseUnreadable:
		return true
	}
	return false
}

// Control is the cluster-wide control state.
type Control struct {
	Paused      bool
	PauseReason string
	PausedAt    time.Time
	// PausedBy is who paused (`rollboot pause`: the ACL token's name).
	PausedBy string
	// PausedUntil is when the rollout-wide pause ends by itself (`rollboot
	// pause -until/-for`); zero: when someone resumes.
	PausedUntil time.Time
	// GroupPauses and HostPauses are the pauses of one group or one host, by
	// its name (`rollboot pause -group G`, `rollboot pause HOST`).
	GroupPauses map[string]Pause
	HostPauses  map[string]Pause
	// Requests are manual reboot requests (`rollboot request`), by host.
	Requests map[string]Request
	// Cancels suppress a host's requests made at or before the given time.
	Cancels map[string]time.Time
	// CanceledBy is who canceled, by host (`rollboot cancel`); "" when unknown.
	CanceledBy map[string]string
	// Releases ask the coordinator to free a stuck host's slot, by host.
	Releases map[string]time.Time
	// ReleasedBy is who asked for a release, by host (`rollboot release`).
	ReleasedBy map[string]string
	// Approvals let hosts drain though their node runs singletons (`rollboot
	// approve`), by host, until they expire.
	Approvals map[string]Approval
	// Problems are the entries that could not be read (skipped), for status and logs.
	Problems []string

	ModifyIndex uint64 // of the control variable

	raw     map[string]string      // the control variable's items as read
	legacy  map[string]HostControl // entries found in the control variable itself
	hostIdx map[string]uint64      // ModifyIndex of each per-host control variable
	// newer: the control variable has a version this rollboot does not know;
	// newerHosts: likewise for these hosts' variables. Neither is overwritten.
	newer      bool
	newerHosts map[string]bool
}

// Request is a manual reboot request.
type Request struct {
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	// Urgent: the host skips its group's windows and freezes (`rollboot
	// request -urgent`), never a safety gate nor an operator's pause.
	Urgent bool `json:"urgent,omitempty"`
}

// Pause is an operator's pause of a group or a host: no new drain starts
// there until Until (zero: until resumed).
type Pause struct {
	At     time.Time `json:"at"`
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
}

// InForce reports whether the pause holds at now: it has not expired.
func (p Pause) InForce(now time.Time) bool { return p.Until.IsZero() || now.Before(p.Until) }

// InForce returns the control state as it holds at now: a rollout-wide pause
// past its end is no pause, and the group and host pauses past theirs are left
// out. The stored state is not changed (an expired pause stays stored until
// someone resumes or pauses again): the coordinator ignores it.
func (c Control) InForce(now time.Time) Control {
	if c.Paused && !c.PausedUntil.IsZero() && !now.Before(c.PausedUntil) {
		c.Paused, c.PauseReason, c.PausedAt, c.PausedBy, c.PausedUntil = false, "", time.Time{}, "", time.Time{}
	}
	c.GroupPauses, c.HostPauses = pausesInForce(c.GroupPauses, now), pausesInForce(c.HostPauses, now)
	return c
}

func pausesInForce(m map[string]Pause, now time.Time) map[string]Pause {
	var out map[string]Pause
	for k, p := range m {
		if p.InForce(now) {
			if out == nil {
				out = map[string]Pause{}
			}
			out[k] = p
		}
	}
	return out
}

// Describe is a pause in words: "paused until T by WHO: REASON".
func (p Pause) Describe() string {
	s := "paused"
	if !p.Until.IsZero() {
		s += " until " + p.Until.UTC().Format(time.RFC3339)
	}
	if p.By != "" {
		s += " by " + p.By
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// GlobalPause is the rollout-wide pause as a Pause, and whether there is one
// (expired or not).
func (c Control) GlobalPause() (Pause, bool) {
	return Pause{At: c.PausedAt, Until: c.PausedUntil, Reason: c.PauseReason, By: c.PausedBy}, c.Paused
}

// HistoryRecord is one finished reboot cycle.
type HistoryRecord struct {
	Host    string
	Group   string
	GrantID string
	Outcome string // "rebooted", "released", "canceled", "failed", "abandoned", "interrupted", "held", "node_gone"
	Reason  string
	// RequestedBy is who asked for the reboot by hand (`rollboot request`, a
	// FleetLock client): the request's By; "" when the host's agent found the
	// need itself.
	RequestedBy  string
	BootIDBefore string
	BootIDAfter  string
	Forced       bool
	// Error is why the cycle failed (outcome "failed"): the agent's reported
	// failure; or, for a host rebooted whose slot was freed at its healthy
	// deadline with workloads still unhealthy (healthy.on_deadline =
	// "release"), what was unhealthy; or, for a host that rebooted after
	// an operator interrupted its attempt, how the attempt had ended.
	Error    string
	Timeline map[string]time.Time
	Finished time.Time

	// ApprovedBy: who approved the cycle (Plan.ApprovedBy); "" when its group
	// needs no approval.
	ApprovedBy string
	// Fingerprint is what the host's record said the reboot installs when the
	// cycle was granted (its wave); "" when it said nothing.
	Fingerprint string
}

// ---- codecs: one per record type (codec.go) --------------------------------------

// hostCodec is the schema of a host record.
var hostCodec = codec[HostRecord]{version: 1, fields: []field[HostRecord]{
	text("host", func(r *HostRecord) *string { return &r.Host }),
	text("node_id", func(r *HostRecord) *string { return &r.NodeID }),
	text("hostname", func(r *HostRecord) *string { return &r.Hostname }),
	list("roles", func(r *HostRecord) *[]string { return &r.Roles }, true),
	text("boot_id", func(r *HostRecord) *string { return &r.BootID }),
	instant("booted_at", func(r *HostRecord) *time.Time { return &r.BootedAt }, false),
	flag("reboot_required", func(r *HostRecord) *bool { return &r.RebootRequired }, true),
	text("reason", func(r *HostRecord) *string { return &r.Reason }),
	instant("requested_at", func(r *HostRecord) *time.Time { return &r.RequestedAt }, false),
	text("fingerprint", func(r *HostRecord) *string { return &r.Fingerprint }),
	text("rebooting_grant", func(r *HostRecord) *string { return &r.RebootingGrant }),
	text("rebooted_grant", func(r *HostRecord) *string { return &r.RebootedGrant }),
	text("fleetlock_id", func(r *HostRecord) *string { return &r.FleetLockID }),
	text("group", func(r *HostRecord) *string { return &r.Group }),
	flag("vault_sealed", func(r *HostRecord) *bool { return &r.VaultSealed }, false),
	text("agent_version", func(r *HostRecord) *string { return &r.AgentVersion }),
	text("detect_error", func(r *HostRecord) *string { return &r.DetectError }),
	text("discover_error", func(r *HostRecord) *string { return &r.DiscoverError }),
	text("agent_job", func(r *HostRecord) *string { return &r.AgentJob }),
	text("hold_reason", func(r *HostRecord) *string { return &r.HoldReason }),
	part("failed_step", false, func(r *HostRecord) **RebootFailure { return &r.Failure }, []field[RebootFailure]{
		text("failed_grant", func(f *RebootFailure) *string { return &f.Grant }),
		text("failed_step", func(f *RebootFailure) *string { return &f.Step }),
		number("failed_exit_status", func(f *RebootFailure) *int { return &f.ExitStatus }, true),
		text("failed_message", func(f *RebootFailure) *string { return &f.Message }),
		instant("failed_at", func(f *RebootFailure) *time.Time { return &f.At }, false),
	}),
	object("servers", func(r *HostRecord) *[]Server { return &r.Servers }, noElements[Server]),
}}

func (r HostRecord) items() map[string]string { return hostCodec.encode(r) }

// Equal reports whether two host records say the same: whether they would be
// stored as the same items (roles are a set, times are instants; ModifyIndex,
// which says where a record was read, does not count). It is how a writer tells
// that its record needs no write, and how an agent tells that its record was
// changed by someone else.
func (r HostRecord) Equal(o HostRecord) bool {
	return r.identical(o) || maps.Equal(r.items(), o.items())
}

// Items is the record as the items of its variable, as PutHost writes them.
func (r HostRecord) Items() map[string]string { return r.items() }

// HostFromItems decodes a record from the items of its variable, written at
// index; where names it in errors.
func HostFromItems(where string, items map[string]string, index uint64) (HostRecord, error) {
	return decodeHost(&api.Variable{Path: where, Items: items, ModifyIndex: index})
}

func decodeHost(v *api.Variable) (HostRecord, error) {
	r, err := decodeStrict(hostCodec, v.Path, v.Items)
	r.ModifyIndex = v.ModifyIndex
	if err == nil && r.Host == "" {
		err = fmt.Errorf("variable %s: item %q: missing", v.Path, "host")
	}
	return r, err
}

// planCodec is the schema of a plan.
//
// Version 2 adds the cordon (cordoned_at, cordon_node): a reader that did
// not know it would take the cordoned node for an operator's and never give
// it back, so a plan that holds a cordon is written as version 2, and any
// other as version 1, which every reader reads (writeVersion).
var planCodec = codec[Plan]{version: 2, writeVersion: func(p *Plan) int {
	if !p.CordonedAt.IsZero() {
		return 2
	}
	return 1
}, fields: []field[Plan]{
	text("host", func(p *Plan) *string { return &p.Host }),
	text("phase", func(p *Plan) *string { return &p.Phase }),
	instant("phase_since", func(p *Plan) *time.Time { return &p.PhaseSince }, false),
	text("group", func(p *Plan) *string { return &p.Group }),
	text("reason", func(p *Plan) *string { return &p.Reason }),
	instant("requested_at", func(p *Plan) *time.Time { return &p.RequestedAt }, false),
	text("grant_id", func(p *Plan) *string { return &p.GrantID }),
	number("attempt", func(p *Plan) *int { return &p.Attempt }, false),
	flag("eligible_before", func(p *Plan) *bool { return &p.EligibleBefore }, true),
	text("boot_id_at_grant", func(p *Plan) *string { return &p.BootIDAtGrant }),
	text("node_id", func(p *Plan) *string { return &p.NodeID }),
	list("system_jobs", func(p *Plan) *[]string { return &p.SystemJobs }, false),
	instant("next_try", func(p *Plan) *time.Time { return &p.NextTry }, false),
	text("last_error", func(p *Plan) *string { return &p.LastError }),
	text("waiting", func(p *Plan) *string { return &p.Waiting }),
	text("waiting_kind", func(p *Plan) *string { return &p.WaitingKind }),
	flag("forced", func(p *Plan) *bool { return &p.Forced }, false),
	counter("drained_index", func(p *Plan) *uint64 { return &p.DrainedIndex }),
	instant("servers_stable_since", func(p *Plan) *time.Time { return &p.ServersStableSince }, false),
	flag("manual_request", func(p *Plan) *bool { return &p.ManualRequest }, false),
	instant("uptime_booted_at", func(p *Plan) *time.Time { return &p.UptimeBootedAt }, false),
	text("fingerprint", func(p *Plan) *string { return &p.Fingerprint }),
	text("gone_boot_id", func(p *Plan) *string { return &p.GoneBootID }),
	flag("held", func(p *Plan) *bool { return &p.Held }, false),
	instant("node_gone_since", func(p *Plan) *time.Time { return &p.NodeGoneSince }, false),
	instant("cordoned_at", func(p *Plan) *time.Time { return &p.CordonedAt }, false),
	text("cordon_node", func(p *Plan) *string { return &p.CordonNode }),
	text("no_cordon", func(p *Plan) *string { return &p.NoCordon }),
	text("last_after_boot_id", func(p *Plan) *string { return &p.LastAfterBootID }),
	instant("last_completed", func(p *Plan) *time.Time { return &p.LastCompleted }, false),
	text("last_unhealthy", func(p *Plan) *string { return &p.LastUnhealthy }),
	number("loop_count", func(p *Plan) *int { return &p.LoopCount }, false),
	instant("last_need_at", func(p *Plan) *time.Time { return &p.LastNeedAt }, false),
	text("approved_by", func(p *Plan) *string { return &p.ApprovedBy }),
	instant("approval_until", func(p *Plan) *time.Time { return &p.ApprovalUntil }, false),
	instant("awaiting_since", func(p *Plan) *time.Time { return &p.AwaitingSince }, false),
	object("timeline", func(p *Plan) *map[string]time.Time { return &p.Timeline }, noEntries[string, time.Time]),
	object("drain_starts", func(p *Plan) *[]time.Time { return &p.DrainStarts }, noElements[time.Time]),
}}

func (p Plan) items() map[string]string { return planCodec.encode(p) }

func decodePlan(v *api.Variable) (Plan, error) {
	p, err := decodeStrict(planCodec, v.Path, v.Items)
	p.ModifyIndex = v.ModifyIndex
	if errors.Is(err, ErrUnknownVersion) {
		return p, err
	}
	if err == nil && p.Host == "" {
		err = fmt.Errorf("variable %s: item %q: missing", v.Path, "host")
	}
	if p.Phase == "" {
		p.Phase = PhaseIdle
	}
	return p, err
}

// historyCodec is the schema of a history record.
var historyCodec = codec[HistoryRecord]{version: 1, fields: []field[HistoryRecord]{
	text("host", func(h *HistoryRecord) *string { return &h.Host }),
	text("group", func(h *HistoryRecord) *string { return &h.Group }),
	text("grant_id", func(h *HistoryRecord) *string { return &h.GrantID }),
	text("outcome", func(h *HistoryRecord) *string { return &h.Outcome }),
	text("reason", func(h *HistoryRecord) *string { return &h.Reason }),
	text("requested_by", func(h *HistoryRecord) *string { return &h.RequestedBy }),
	text("boot_id_before", func(h *HistoryRecord) *string { return &h.BootIDBefore }),
	text("boot_id_after", func(h *HistoryRecord) *string { return &h.BootIDAfter }),
	flag("forced", func(h *HistoryRecord) *bool { return &h.Forced }, false),
	text("error", func(h *HistoryRecord) *string { return &h.Error }),
	text("approved_by", func(h *HistoryRecord) *string { return &h.ApprovedBy }),
	instant("finished", func(h *HistoryRecord) *time.Time { return &h.Finished }, false),
	object("timeline", func(h *HistoryRecord) *map[string]time.Time { return &h.Timeline }, noEntries[string, time.Time]),
	text("fingerprint", func(h *HistoryRecord) *string { return &h.Fingerprint }),
}}

func (h HistoryRecord) items() map[string]string { return historyCodec.encode(h) }

func decodeHistory(v *api.Variable) (HistoryRecord, error) {
	return decodeStrict(historyCodec, v.Path, v.Items)
}

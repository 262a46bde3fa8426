package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

	RebootRequired bool
	Reason         string    // why a reboot is needed ("sentinel file /var/run/reboot-required")
	RequestedAt    time.Time // when the current need was first seen; stable while it lasts

	// RebootingGrant is the grant the agent is rebooting for: set right before the
	// reboot, so the coordinator knows the reboot began.
	RebootingGrant string
	FleetLockID    string
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
	Timeline       map[string]time.Time // first time each phase was entered for this grant
	Forced         bool                 // the drain hit its deadline and was forced
	// DrainedIndex is the node's ModifyIndex when its drain completed: a "Node
	// re-registered" event after it proves the host went down and came back.
	DrainedIndex uint64

	// GoneBootID is a boot the host is known to have left (its node re-registered)
	// while its agent has not reported since: what its record says of that boot,
	// including a reboot need, is stale.
	GoneBootID string

	// Held: the agent holds the reboot at its final go/no-go (the slot stays
	// taken); when the hold ends, the time to come back counts from then.
	Held bool

	// The last finished reboot, for the reboot-loop guard.
	LastAfterBootID string
	LastCompleted   time.Time
	LoopCount       int
	// LastNeedAt is when the need the host still showed as its last reboot
	// finished was first seen (zero: the reboot cleared it): only that same need,
	// not a later one, makes a reboot loop.
	LastNeedAt time.Time

	ModifyIndex uint64
}

// Active reports whether the host holds a slot of its group (is out of service).
func (p Plan) Active() bool {
	switch p.Phase {
	case PhaseDraining, PhaseDrained, PhaseRebooting, PhaseRejoining, PhaseStuck:
		return true
	}
	return false
}

// Control is the cluster-wide control state.
type Control struct {
	Paused      bool
	PauseReason string
	PausedAt    time.Time
	// Requests are manual reboot requests (`rollboot request`), by host.
	Requests map[string]Request
	// Cancels suppress a host's requests made at or before the given time.
	Cancels map[string]time.Time
	// Releases ask the coordinator to free a stuck host's slot, by host.
	Releases map[string]time.Time
	// Problems are the entries that could not be read (skipped), for status and logs.
	Problems []string

	ModifyIndex uint64 // of the control variable

	raw     map[string]string      // the control variable's items as read
	legacy  map[string]HostControl // entries found in the control variable itself
	hostIdx map[string]uint64      // ModifyIndex of each per-host control variable
}

// Request is a manual reboot request.
type Request struct {
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// HistoryRecord is one finished reboot cycle.
type HistoryRecord struct {
	Host         string
	Group        string
	GrantID      string
	Outcome      string // "rebooted", "released", "canceled"
	Reason       string
	BootIDBefore string
	BootIDAfter  string
	Forced       bool
	// Error is why the cycle failed (outcome "failed"): the agent's reported failure.
	Error    string
	Timeline map[string]time.Time
	Finished time.Time
}

// ---- encoding: Nomad variable items are string maps ----------------------------

type enc map[string]string

func (e enc) str(k, v string) {
	if v != "" {
		e[k] = v
	}
}
func (e enc) time(k string, t time.Time) {
	if !t.IsZero() {
		e[k] = t.UTC().Format(time.RFC3339Nano)
	}
}
func (e enc) bool(k string, b bool) { e[k] = strconv.FormatBool(b) }
func (e enc) int(k string, n int) {
	if n != 0 {
		e[k] = strconv.Itoa(n)
	}
}
func (e enc) json(k string, v any, empty bool) {
	if empty {
		return
	}
	b, _ := json.Marshal(v)
	e[k] = string(b)
}

type dec struct {
	items api.VariableItems
	path  string
	err   error
}

func (d *dec) fail(k string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("variable %s: item %q: %w", d.path, k, err)
	}
}
func (d *dec) str(k string) string { return d.items[k] }
func (d *dec) time(k string) time.Time {
	v := d.items[k]
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		d.fail(k, err)
	}
	return t
}
func (d *dec) bool(k string) bool {
	v := d.items[k]
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		d.fail(k, err)
	}
	return b
}
func (d *dec) int(k string) int {
	v := d.items[k]
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		d.fail(k, err)
	}
	return n
}
func (d *dec) uint(k string) uint64 {
	v := d.items[k]
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		d.fail(k, err)
	}
	return n
}
func (d *dec) json(k string, out any) {
	v := d.items[k]
	if v == "" {
		return
	}
	if err := json.Unmarshal([]byte(v), out); err != nil {
		d.fail(k, err)
	}
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (r HostRecord) items() map[string]string {
	e := enc{}
	e.str("host", r.Host)
	e.str("node_id", r.NodeID)
	e.str("hostname", r.Hostname)
	roles := append([]string(nil), r.Roles...)
	sort.Strings(roles)
	e.str("roles", strings.Join(roles, ","))
	e.str("boot_id", r.BootID)
	e.bool("reboot_required", r.RebootRequired)
	e.str("reason", r.Reason)
	e.time("requested_at", r.RequestedAt)
	e.str("rebooting_grant", r.RebootingGrant)
	e.str("fleetlock_id", r.FleetLockID)
	e.str("group", r.Group)
	e.json("servers", r.Servers, len(r.Servers) == 0)
	if r.VaultSealed {
		e.bool("vault_sealed", true)
	}
	e.str("agent_version", r.AgentVersion)
	e.str("detect_error", r.DetectError)
	e.str("discover_error", r.DiscoverError)
	e.str("agent_job", r.AgentJob)
	e.str("hold_reason", r.HoldReason)
	if f := r.Failure; f != nil {
		e.str("failed_grant", f.Grant)
		e.str("failed_step", f.Step)
		e["failed_exit_status"] = strconv.Itoa(f.ExitStatus)
		e.str("failed_message", f.Message)
		e.time("failed_at", f.At)
	}
	return e
}

func decodeHost(v *api.Variable) (HostRecord, error) {
	d := &dec{items: v.Items, path: v.Path}
	r := HostRecord{
		Host:           d.str("host"),
		NodeID:         d.str("node_id"),
		Hostname:       d.str("hostname"),
		Roles:          splitList(d.str("roles")),
		BootID:         d.str("boot_id"),
		RebootRequired: d.bool("reboot_required"),
		Reason:         d.str("reason"),
		RequestedAt:    d.time("requested_at"),
		RebootingGrant: d.str("rebooting_grant"),
		FleetLockID:    d.str("fleetlock_id"),
		Group:          d.str("group"),
		VaultSealed:    d.bool("vault_sealed"),
		AgentVersion:   d.str("agent_version"),
		DetectError:    d.str("detect_error"),
		DiscoverError:  d.str("discover_error"),
		AgentJob:       d.str("agent_job"),
		HoldReason:     d.str("hold_reason"),
		ModifyIndex:    v.ModifyIndex,
	}
	if d.str("failed_step") != "" {
		r.Failure = &RebootFailure{Grant: d.str("failed_grant"), Step: d.str("failed_step"),
			ExitStatus: d.int("failed_exit_status"), Message: d.str("failed_message"), At: d.time("failed_at")}
	}
	d.json("servers", &r.Servers)
	if r.Host == "" {
		d.fail("host", fmt.Errorf("missing"))
	}
	return r, d.err
}

func (p Plan) items() map[string]string {
	e := enc{}
	e.str("host", p.Host)
	e.str("phase", p.Phase)
	e.time("phase_since", p.PhaseSince)
	e.str("group", p.Group)
	e.str("reason", p.Reason)
	e.time("requested_at", p.RequestedAt)
	e.str("grant_id", p.GrantID)
	e.int("attempt", p.Attempt)
	e.bool("eligible_before", p.EligibleBefore)
	e.str("boot_id_at_grant", p.BootIDAtGrant)
	e.str("node_id", p.NodeID)
	e.str("system_jobs", strings.Join(p.SystemJobs, ","))
	e.time("next_try", p.NextTry)
	e.str("last_error", p.LastError)
	e.str("waiting", p.Waiting)
	e.json("timeline", p.Timeline, len(p.Timeline) == 0)
	if p.Forced {
		e.bool("forced", true)
	}
	if p.DrainedIndex != 0 {
		e["drained_index"] = strconv.FormatUint(p.DrainedIndex, 10)
	}
	e.str("gone_boot_id", p.GoneBootID)
	if p.Held {
		e.bool("held", true)
	}
	e.str("last_after_boot_id", p.LastAfterBootID)
	e.time("last_completed", p.LastCompleted)
	e.int("loop_count", p.LoopCount)
	e.time("last_need_at", p.LastNeedAt)
	return e
}

func decodePlan(v *api.Variable) (Plan, error) {
	d := &dec{items: v.Items, path: v.Path}
	p := Plan{
		Host:            d.str("host"),
		Phase:           d.str("phase"),
		PhaseSince:      d.time("phase_since"),
		Group:           d.str("group"),
		Reason:          d.str("reason"),
		RequestedAt:     d.time("requested_at"),
		GrantID:         d.str("grant_id"),
		Attempt:         d.int("attempt"),
		EligibleBefore:  d.bool("eligible_before"),
		BootIDAtGrant:   d.str("boot_id_at_grant"),
		NodeID:          d.str("node_id"),
		SystemJobs:      splitList(d.str("system_jobs")),
		NextTry:         d.time("next_try"),
		LastError:       d.str("last_error"),
		Waiting:         d.str("waiting"),
		Forced:          d.bool("forced"),
		DrainedIndex:    d.uint("drained_index"),
		GoneBootID:      d.str("gone_boot_id"),
		Held:            d.bool("held"),
		LastAfterBootID: d.str("last_after_boot_id"),
		LastCompleted:   d.time("last_completed"),
		LoopCount:       d.int("loop_count"),
		LastNeedAt:      d.time("last_need_at"),
		ModifyIndex:     v.ModifyIndex,
	}
	d.json("timeline", &p.Timeline)
	if p.Host == "" {
		d.fail("host", fmt.Errorf("missing"))
	}
	if p.Phase == "" {
		p.Phase = PhaseIdle
	}
	return p, d.err
}

func (h HistoryRecord) items() map[string]string {
	e := enc{}
	e.str("host", h.Host)
	e.str("group", h.Group)
	e.str("grant_id", h.GrantID)
	e.str("outcome", h.Outcome)
	e.str("reason", h.Reason)
	e.str("boot_id_before", h.BootIDBefore)
	e.str("boot_id_after", h.BootIDAfter)
	if h.Forced {
		e.bool("forced", true)
	}
	e.str("error", h.Error)
	e.json("timeline", h.Timeline, len(h.Timeline) == 0)
	e.time("finished", h.Finished)
	return e
}

func decodeHistory(v *api.Variable) (HistoryRecord, error) {
	d := &dec{items: v.Items, path: v.Path}
	h := HistoryRecord{
		Host:         d.str("host"),
		Group:        d.str("group"),
		GrantID:      d.str("grant_id"),
		Outcome:      d.str("outcome"),
		Reason:       d.str("reason"),
		BootIDBefore: d.str("boot_id_before"),
		BootIDAfter:  d.str("boot_id_after"),
		Forced:       d.bool("forced"),
		Error:        d.str("error"),
		Finished:     d.time("finished"),
	}
	d.json("timeline", &h.Timeline)
	return h, d.err
}

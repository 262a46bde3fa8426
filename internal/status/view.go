// Package status is the view of a rollout that `rollboot status` prints: every
// host's phase and why it waits, and what the coordinator skips (records it
// cannot use, unreadable control entries and plans, agents that do not run).
//
// Build is a pure function of the stored records; Read reads them through narrow
// interfaces over the store and Nomad and adds the coordinator's own checks;
// WriteText and WriteJSON render the view. The CLI uses it, and so can anything
// else that shows the rollout (a status page, metrics).
package status

import (
	"fmt"
	"sort"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Host is one row of the status.
type Host struct {
	Host        string   `json:"host"`
	Group       string   `json:"group,omitempty"`
	NodeID      string   `json:"node_id,omitempty"`
	Roles       []string `json:"roles,omitempty"`
	FleetLockID string   `json:"fleetlock_id,omitempty"`
	BootID      string   `json:"boot_id,omitempty"`
	// BootedAt is when the host booted, as its agent reads it (its uptime, for
	// the groups' max_uptime).
	BootedAt       time.Time `json:"booted_at,omitzero"`
	Phase          string    `json:"phase"`
	Since          time.Time `json:"since,omitzero"`
	RebootRequired bool      `json:"reboot_required"`
	Reason         string    `json:"reason,omitempty"`
	RequestedAt    time.Time `json:"requested_at,omitzero"`
	// Fingerprint names what the reboot installs, as the agent's detectors
	// tell it.
	Fingerprint   string `json:"fingerprint,omitempty"`
	Waiting       string `json:"waiting,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	DetectError   string `json:"detect_error,omitempty"`
	DiscoverError string `json:"discover_error,omitempty"`
	ManualRequest bool   `json:"manual_request,omitempty"`
	// UrgentRequest: the manual request skips windows and freezes
	// (`rollboot request -urgent`).
	UrgentRequest bool `json:"urgent_request,omitempty"`
	// AgentMissing says why the host's agent is known not to run.
	AgentMissing string `json:"agent_missing,omitempty"`
	// RecordIgnored says why the coordinator does not use the host's record.
	RecordIgnored string `json:"record_ignored,omitempty"`
	// HoldReason: the agent holds the reboot at its final go/no-go, and why.
	HoldReason string `json:"hold_reason,omitempty"`
	// Held: the host waits on a hold that an operator may have to act on (a
	// window, a gate, an alert, a backoff, a canceled need...), not on its
	// turn in its group or the next step of its cycle. Its plan stores only
	// such reasons (phase.WaitReason.Stored).
	Held bool `json:"held,omitempty"`
	// HoldKind is the kind of the hold (the reason label of
	// rollboot_hosts_waiting, or "canceled_need"); "" when not known (a plan
	// of an older rollboot).
	HoldKind string `json:"hold_kind,omitempty"`
	// Cordoned: rollboot made the host's node ineligible because it is next in
	// line (node_meta.cordon_next); NoCordon: why a host next in line is not
	// cordoned.
	Cordoned bool   `json:"cordoned,omitempty"`
	NoCordon string `json:"no_cordon,omitempty"`
	// Failure is the host's last failed reboot attempt, as its agent reported it.
	Failure *Failure `json:"failure,omitempty"`
	// AgentVersion is the version of rollboot the host's agent runs.
	AgentVersion string `json:"agent_version,omitempty"`
	// Timeline is when the host's current cycle first entered each phase (none
	// when idle: finished cycles are in the history).
	Timeline map[string]time.Time `json:"timeline,omitempty"`
	// DrainedItself is when the host's Nomad client last drained its own node
	// on shutdown (drain_on_shutdown), as the node's last drain says (Nomad
	// records the client as its author); zero when its last drain was
	// anyone else's.
	DrainedItself time.Time `json:"drained_itself_on_shutdown,omitzero"`
}

// Failure is a failed reboot attempt.
type Failure struct {
	Grant      string    `json:"grant"`
	Step       string    `json:"step"`
	ExitStatus int       `json:"exit_status"`
	Message    string    `json:"message"`
	At         time.Time `json:"at,omitzero"`
}

// View is the whole status, as `rollboot status -json` prints it.
type View struct {
	// Policy is the stored policy and what the leading coordinator enforces
	// (nil: not read).
	Policy      *Policy `json:"policy,omitempty"`
	Paused      bool    `json:"paused"`
	PauseReason string  `json:"pause_reason,omitempty"`
	// PausedBy is who paused (the ACL token's name, else user@host).
	PausedBy string `json:"paused_by,omitempty"`
	// PausedUntil: when the rollout-wide pause ends by itself (zero: when
	// resumed). GroupPauses and HostPauses: the pauses of a group or a host
	// (`rollboot pause -group G`, `rollboot pause HOST`), expired ones too.
	PausedUntil time.Time              `json:"paused_until,omitzero"`
	GroupPauses map[string]store.Pause `json:"group_pauses,omitempty"`
	HostPauses  map[string]store.Pause `json:"host_pauses,omitempty"`
	Hosts       []Host                 `json:"hosts"`
	// Unbacked: hosts without a Nomad node whose records nothing backs (no
	// plan, no server or FleetLock role, not in a group's hosts_without_node),
	// left out of Hosts as the coordinator leaves them out (sorted).
	Unbacked []string `json:"unbacked_records,omitempty"`
	// Ignored are the host records that cannot be used (skipped), and why.
	Ignored []store.BadRecord `json:"ignored_records,omitempty"`
	// ControlProblems are the control entries that cannot be read (skipped).
	ControlProblems []string `json:"control_problems,omitempty"`
	// PlanProblems are plans with items that cannot be read (read as zero).
	PlanProblems []store.BadRecord `json:"plan_problems,omitempty"`
	// AgentCheck says how agents were checked, when they could not be.
	AgentCheck string `json:"agent_check,omitempty"`
	// MixedVersions lists the agents' versions with how many hosts run each, when
	// they do not all run the same one (during an upgrade), most hosts first.
	MixedVersions []VersionCount `json:"mixed_versions,omitempty"`
	// Silences are the Alertmanager silences the coordinator keeps for hosts
	// out for their reboot (silences.go); SilenceProblem says why they could
	// not all be read.
	Silences       []Silence `json:"silences,omitempty"`
	SilenceProblem string    `json:"silence_problem,omitempty"`
	// Waves are the waves under way or held (waves.go); WaveProblem says why
	// they could not be read.
	Waves       []Wave `json:"waves,omitempty"`
	WaveProblem string `json:"wave_problem,omitempty"`
	// Halts are the scopes the failure budgets halted (halts.go); HaltProblem
	// says why the halt state cannot be read.
	Halts       []Halt `json:"halts,omitempty"`
	HaltProblem string `json:"halt_problem,omitempty"`
}

// VersionCount is how many hosts' agents run one version.
type VersionCount struct {
	Version string `json:"version"`
	Hosts   int    `json:"hosts"`
}

// mixedVersions counts the agents' versions; it returns nil when they agree.
// A record without a version (a FleetLock host, an agent older than the field)
// counts as no version.
func mixedVersions(hosts []Host) []VersionCount {
	count := map[string]int{}
	for _, h := range hosts {
		if h.AgentVersion != "" {
			count[h.AgentVersion]++
		}
	}
	if len(count) < 2 {
		return nil
	}
	out := make([]VersionCount, 0, len(count))
	for v, n := range count {
		out = append(out, VersionCount{Version: v, Hosts: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hosts != out[j].Hosts {
			return out[i].Hosts > out[j].Hosts
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// canceledNeed says, for an idle host whose agent's need a cancel suppresses,
// that the need is ignored and how to ask again: nothing else would tell why a
// host that needs a reboot stays idle.
func canceledNeed(v *Host, h store.HostRecord, ctl store.Control) {
	at, ok := ctl.Cancels[h.Host]
	if !ok || !h.RebootRequired || h.RequestedAt.After(at) || v.Phase != store.PhaseIdle || v.ManualRequest {
		return
	}
	by := ""
	if name := ctl.CanceledBy[h.Host]; name != "" {
		by = " by " + name
	}
	v.Held, v.HoldKind = true, "canceled_need"
	v.Waiting = fmt.Sprintf("its need was canceled at %s%s (rollboot cancel): ignored until its agent finds a new one or `rollboot request %s`",
		at.UTC().Format(time.RFC3339), by, h.Host)
}

// Build is the view of the host records, plans and control state: a row for
// every host with a record, a plan or a manual request, in name order.
func Build(hosts []store.HostRecord, plans map[string]store.Plan, ctl store.Control) View {
	out := View{Paused: ctl.Paused, PauseReason: ctl.PauseReason, PausedBy: ctl.PausedBy, Hosts: []Host{},
		PausedUntil: ctl.PausedUntil, GroupPauses: ctl.GroupPauses, HostPauses: ctl.HostPauses}
	seen := map[string]bool{}
	for _, h := range hosts {
		seen[h.Host] = true
		v := Host{Host: h.Host, NodeID: h.NodeID, Roles: h.Roles, FleetLockID: h.FleetLockID, BootID: h.BootID, BootedAt: h.BootedAt, Phase: store.PhaseIdle,
			RebootRequired: h.RebootRequired, Reason: h.Reason, RequestedAt: h.RequestedAt, Fingerprint: h.Fingerprint, DetectError: h.DetectError,
			DiscoverError: h.DiscoverError, AgentVersion: h.AgentVersion}
		if p, ok := plans[h.Host]; ok {
			fillPlan(&v, p)
		}
		_, v.ManualRequest = ctl.Requests[h.Host]
		v.UrgentRequest = ctl.Requests[h.Host].Urgent
		fillAgentReport(&v, h)
		canceledNeed(&v, h, ctl)
		out.Hosts = append(out.Hosts, v)
	}
	for name, p := range plans {
		if !seen[name] {
			v := Host{Host: name}
			fillPlan(&v, p)
			out.Hosts = append(out.Hosts, v)
		}
	}
	for name := range ctl.Requests {
		if !seen[name] && plans[name].Host == "" {
			out.Hosts = append(out.Hosts, Host{Host: name, Phase: store.PhaseIdle, ManualRequest: true, Waiting: "no agent has published this host"})
		}
	}
	sort.Slice(out.Hosts, func(i, j int) bool { return out.Hosts[i].Host < out.Hosts[j].Host })
	explainProgress(&out, plans)
	out.MixedVersions = mixedVersions(out.Hosts)
	return out
}

func fillPlan(v *Host, p store.Plan) {
	v.Group, v.Phase, v.Since, v.Waiting, v.LastError = p.Group, p.Phase, p.PhaseSince, p.Waiting, p.LastError
	v.Held = p.Waiting != "" && p.Phase != store.PhaseIdle
	if v.Held {
		v.HoldKind = p.WaitingKind
	}
	if p.Phase != store.PhaseIdle && len(p.Timeline) > 0 {
		v.Timeline = p.Timeline
	}
	v.Cordoned, v.NoCordon = !p.CordonedAt.IsZero(), p.NoCordon
	if v.NodeID == "" {
		v.NodeID = p.NodeID
	}
	if v.Reason == "" {
		v.Reason = p.Reason
	}
}

// fillAgentReport adds the agent's hold and last failure to the row.
func fillAgentReport(v *Host, h store.HostRecord) {
	if h.HoldReason != "" && h.RebootingGrant != "" {
		v.HoldReason = h.HoldReason
	}
	if f := h.Failure; f != nil {
		v.Failure = &Failure{Grant: f.Grant, Step: f.Step, ExitStatus: f.ExitStatus, Message: f.Message, At: f.At}
	}
}

// markIgnored shows each ignored record on its host's row; a host whose only
// record does not decode has no row yet: it gets one.
func markIgnored(s *View) {
	why := map[string]string{}
	for _, b := range s.Ignored {
		why[b.Host] = b.Err
	}
	for i := range s.Hosts {
		s.Hosts[i].RecordIgnored = why[s.Hosts[i].Host]
	}
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		seen[h.Host] = true
	}
	for _, b := range s.Ignored {
		if !seen[b.Host] {
			s.Hosts = append(s.Hosts, Host{Host: b.Host, Phase: store.PhaseIdle, RecordIgnored: b.Err})
			seen[b.Host] = true
		}
	}
	sort.Slice(s.Hosts, func(i, j int) bool { return s.Hosts[i].Host < s.Hosts[j].Host })
}

package preview

import (
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// ObservedGroup is one group as admission sees it now.
type ObservedGroup struct {
	policy.GroupStatus
	// Slots is how many hosts the group may have out at once (policy.Slots).
	Slots int
	// Limit is how many of its nodes may be unavailable at once
	// (policy.MaxUnavailable); -1 when max_unavailable is not set.
	Limit int
}

// ObservedHost is one host with a stored plan or a need, and what a pass would
// decide for it now.
type ObservedHost struct {
	Host  string
	Group string
	// Plan is the host's plan as the pass would start from it: the stored one,
	// or, for a host whose need the coordinator has not seen yet, the pending
	// plan its next pass would make.
	Plan store.Plan
	// Starts: a pass now would grant the host its slot.
	Starts bool
	// Waiting is why the host would not move (zero when it starts or is idle).
	Waiting phase.WaitReason
	// Cordon: "cordoned" when the pass would keep or make the host's node
	// ineligible as next in line (node_meta.cordon_next), "no cordon: ..."
	// when it is next in line without one, and why; "" otherwise.
	Cordon string
	// Clusters are the server clusters the host runs a server of
	// ("product/cluster"): admission takes out at most one host of each at
	// once, across groups (serverGate).
	Clusters []string
	// HoldsSlot: the host awaits its approval and keeps its group's slot
	// meanwhile (admission.Result.HoldsSlot).
	HoldsSlot bool
	// NotBefore: the soak its wave waits for ends then (zero: none).
	NotBefore time.Time
	// Canary: the host is, or starting now would be, a canary of its wave.
	Canary bool
	// After: the groups its group follows, while it waits for them to finish
	// its wave (the estimates chain it after them).
	After []string
	// Urgent: its manual request is urgent (`rollboot request -urgent`): it
	// skips its group's windows and freezes, nothing else.
	Urgent bool
}

// Observed is what a coordinator's pass would decide now, carried out
// nowhere (coordinator.Preview): the input of the estimates.
type Observed struct {
	Now         time.Time
	Paused      bool
	PauseReason string
	// PausedUntil: when the rollout-wide pause ends by itself (zero: when
	// resumed).
	PausedUntil time.Time
	// GroupPauses and HostPauses: the pauses in force of a group, by its
	// name, and of a host, by its name.
	GroupPauses map[string]store.Pause
	HostPauses  map[string]store.Pause
	Groups      []ObservedGroup // the default group first, then the configured ones
	Hosts       []ObservedHost  // sorted by name; idle hosts without a need left out
	// Unreadable are hosts skipped because a read their decision needs failed.
	Unreadable map[string]string
	// Halts are the scopes halted by their failure budget (policy halt.go);
	// HaltsUnknown: why the halt state cannot be read.
	Halts        []policy.Halt
	HaltsUnknown string
	// Rollout is the rollout-wide budget (max_out, max_drains_per_hour), and
	// DrainStarts the drains started in the last hour, every plan's.
	Rollout     policy.RolloutBudget
	DrainStarts []time.Time
}

// ObservedGroups are the groups of statuses, with their slots and limits.
func ObservedGroups(statuses []policy.GroupStatus) []ObservedGroup {
	var out []ObservedGroup
	for _, gs := range statuses {
		limit, ok := policy.MaxUnavailable(gs.Group, gs.Size)
		if !ok {
			limit = -1
		}
		out = append(out, ObservedGroup{GroupStatus: gs, Slots: policy.Slots(gs.Group, gs.Size), Limit: limit})
	}
	return out
}

// Decided fills in h what follows from the pass's decision d for the host,
// whose plan the pass starts from is plan and whose record is rec (nil: none).
func (h *ObservedHost) Decided(plan store.Plan, d phase.Decision, rec *store.HostRecord) {
	h.Plan, h.Waiting, h.Cordon = plan, d.Waiting, cordonText(d.Plan)
	if rec != nil {
		for _, srv := range rec.Servers {
			h.Clusters = append(h.Clusters, phase.ClusterKey(srv))
		}
	}
	if plan.Phase == store.PhasePending && d.Plan.Phase != store.PhasePending && d.Plan.Active() {
		h.Starts, h.Waiting = true, phase.WaitReason{}
	}
	if h.Group == "" {
		h.Group = plan.Group
	}
}

// cordonText says what the preview shows of a plan's cordon (Cordon).
func cordonText(p store.Plan) string {
	switch {
	case p.Phase != store.PhasePending:
		return ""
	case !p.CordonedAt.IsZero():
		return "cordoned"
	case p.NoCordon != "":
		return "no cordon: " + p.NoCordon
	}
	return ""
}

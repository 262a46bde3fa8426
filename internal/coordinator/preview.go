package coordinator

import (
	"context"
	"maps"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/haltkeep"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wavekeep"
)

// Preview is what a reconcile pass would decide now, carried out nowhere: the
// read-only entry point behind `rollboot plan`. It runs the pass's own observe,
// admit and phase.Step, so a preview and the coordinator never disagree on why a host
// waits, and writes nothing (no plan, no drain, no history).

// PreviewGroup is one group as admission sees it now.
type PreviewGroup struct {
	policy.GroupStatus
	// Slots is how many hosts the group may have out at once (policy.Slots).
	Slots int
	// Limit is how many of its nodes may be unavailable at once
	// (policy.MaxUnavailable); -1 when max_unavailable is not set.
	Limit int
}

// PreviewHost is one host with a stored plan or a need, and what a pass would
// decide for it now.
type PreviewHost struct {
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
	// NotBefore: the soak its wave waits for ends then (waves.go; zero: none).
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

// PreviewResult is a whole preview.
type PreviewResult struct {
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
	Groups      []PreviewGroup // the default group first, then the configured ones
	Hosts       []PreviewHost  // sorted by name; idle hosts without a need left out
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

// Preview observes the cluster as a pass does and returns what the pass would
// decide, without carrying any of it out. Only reads are sent to Nomad.
func (c *Coordinator) Preview(ctx context.Context) (PreviewResult, error) {
	c.takeMail() // as a pass starts (mailbox.go)
	s, err := c.observe(ctx)
	if err != nil {
		return PreviewResult{}, err
	}
	s.preview, s.previewAnswers = true, map[string]admission.WebhookAnswer{} // the webhook is not asked (approval.go)
	// A host whose need the coordinator has not turned into a pending plan yet
	// (it is not running, or has not had its pass) would be pending after the
	// next pass: preview from there.
	s.plans = maps.Clone(s.plans)
	for _, name := range s.names {
		if s.hosts[name].err != nil {
			continue
		}
		in := c.input(s, admission.Result{}, name)
		if in.Plan.Phase != store.PhaseIdle {
			continue
		}
		if d := phase.Step(in); d.Plan.Phase == store.PhasePending {
			s.plans[name] = d.Plan
		}
	}
	adm := c.admit(ctx, s) // its reads (alerts, workloads, capacity, an admitted host's system jobs) are reads too
	_, soaks := wavekeep.HoldsUntil(s.waves, s.plans, admissionQueue(s), s.now)
	canaries := wavekeep.Canaries(s.waves, waveHosts(s, s.plans), adm.Admitted, s.now)
	urgent := urgentRequests(s.control)
	res := PreviewResult{Now: s.now, Paused: s.control.Paused, PauseReason: s.control.PauseReason, PausedUntil: s.control.PausedUntil,
		GroupPauses: s.control.GroupPauses, HostPauses: s.control.HostPauses,
		Unreadable: map[string]string{}, HaltsUnknown: s.haltsErr, Halts: haltkeep.List(s.halts),
		Rollout: c.opt.RolloutBudget, DrainStarts: drainStarts(s)}
	for _, gs := range s.statuses {
		limit, ok := policy.MaxUnavailable(gs.Group, gs.Size)
		if !ok {
			limit = -1
		}
		res.Groups = append(res.Groups, PreviewGroup{GroupStatus: gs, Slots: policy.Slots(gs.Group, gs.Size), Limit: limit})
	}
	for _, name := range s.names {
		if err := s.hosts[name].err; err != nil {
			res.Unreadable[name] = err.Error()
			continue
		}
		in := c.input(s, adm, name)
		if in.Plan.Phase == store.PhaseIdle {
			continue
		}
		d := phase.Step(in)
		h := PreviewHost{Host: name, Group: s.hosts[name].group, Plan: in.Plan, Waiting: d.Waiting, HoldsSlot: adm.HoldsSlot[name],
			Cordon: cordonText(d.Plan), NotBefore: soaks[name], Canary: canaries[name], Urgent: urgent[name]}
		if rec := s.hosts[name].rec; rec != nil {
			for _, srv := range rec.Servers {
				h.Clusters = append(h.Clusters, phase.ClusterKey(srv))
			}
		}
		if in.Plan.Phase == store.PhasePending && d.Plan.Phase != store.PhasePending && d.Plan.Active() {
			h.Starts, h.Waiting = true, phase.WaitReason{}
		}
		if h.Group == "" {
			h.Group = in.Plan.Group
		}
		if d.Waiting.Kind == phase.WaitAfterGroup && h.NotBefore.IsZero() {
			h.After = s.waves.Rules[h.Group].After
		}
		res.Hosts = append(res.Hosts, h)
	}
	return res, nil
}

// cordonText says what the preview shows of a plan's cordon (PreviewHost.Cordon).
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

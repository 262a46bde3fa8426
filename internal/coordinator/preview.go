package coordinator

import (
	"context"
	"maps"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/haltkeep"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/preview"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wavekeep"
)

// Preview is what a reconcile pass would decide now, carried out nowhere: the
// read-only entry point behind `rollboot plan`. It runs the pass's own observe,
// admit and phase.Step, so a preview and the coordinator never disagree on why a host
// waits, and writes nothing (no plan, no drain, no history).

// Preview observes the cluster as a pass does and returns what the pass would
// decide, without carrying any of it out. Only reads are sent to Nomad.
func (c *Coordinator) Preview(ctx context.Context) (preview.Observed, error) {
	c.takeMail() // as a pass starts (mailbox.go)
	s, err := c.observe(ctx)
	if err != nil {
		return preview.Observed{}, err
	}
	s.preview, s.previewAnswers = true, map[string]admission.WebhookAnswer{} // the webhook is not asked (holds.go)
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
	s.listBusy()
	adm := c.admit(ctx, s) // its reads (alerts, workloads, capacity, an admitted host's system jobs) are reads too
	_, soaks := wavekeep.HoldsUntil(s.waves, s.plans, admissionQueue(s), s.now)
	canaries := wavekeep.Canaries(s.waves, waveHosts(s, s.plans), adm.Admitted, s.now)
	urgent := urgentRequests(s.control)
	res := preview.Observed{Now: s.now, Paused: s.control.Paused, PauseReason: s.control.PauseReason, PausedUntil: s.control.PausedUntil,
		GroupPauses: s.control.GroupPauses, HostPauses: s.control.HostPauses,
		Unreadable: map[string]string{}, HaltsUnknown: s.haltsErr, Halts: haltkeep.List(s.halts),
		Rollout: c.opt.RolloutBudget, DrainStarts: drainStarts(s)}
	res.Groups = preview.ObservedGroups(s.statuses)
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
		h := preview.ObservedHost{Host: name, Group: s.hosts[name].group, HoldsSlot: adm.HoldsSlot[name],
			NotBefore: soaks[name], Canary: canaries[name], Urgent: urgent[name]}
		h.Decided(in.Plan, d, s.hosts[name].rec)
		if d.Waiting.Kind == phase.WaitAfterGroup && h.NotBefore.IsZero() {
			h.After = s.waves.Rules[h.Group].After
		}
		res.Hosts = append(res.Hosts, h)
	}
	return res, nil
}

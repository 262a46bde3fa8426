package coordinator

import (
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/sideoutput"
	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/store"
)

// After each pass the coordinator hands the stored state to the side outputs
// (package sideoutput: the notifier, the node metadata publisher, the silence
// keeper), each only when what it derives from changed, and what it observed
// to the state metrics.

// storedPlans is the coordinator as package sideoutput sees it: its plans as
// stored.
type storedPlans struct{ c *Coordinator }

// With runs fn with the plans as stored and their generation (plansGen),
// under c.mu.
func (p storedPlans) With(fn func(plans map[string]store.Plan, gen uint64)) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	fn(p.c.plans, p.c.plansGen)
}

// notifyPass hands the notifier the plans as stored, the pause flag as read,
// the halts and the freezes in force at now: before the pass's decisions (the
// plans another leader stored may be about to move on) and after them (a
// freeze's start or end runs a pass: wake.go).
func (c *Coordinator) notifyPass(ctl store.Control, now time.Time) {
	c.side.Notify(storedPlans{c}, ctl, c.halts.Notified(), c.opt.Rules.AllGroups, now)
}

// publishMeta hands the node metadata publisher what each host's node says
// after this pass, next in line among admission's queue.
func (c *Coordinator) publishMeta(s *snapshot) {
	hosts := func(yield func(sideoutput.MetaHost) bool) {
		for name, hv := range s.hosts {
			if !yield(sideoutput.MetaHost{Name: name, Node: hv.node, Rec: hv.rec, Plan: s.plans[name]}) {
				return
			}
		}
	}
	c.side.PublishMeta(storedPlans{c}, c.opt.MetaKeys, hosts, func() []admission.Pending { return admissionQueue(s) })
}

// silencePass hands the silence keeper the plans as stored and the groups'
// silence rules, after the pass.
func (c *Coordinator) silencePass() {
	c.side.Silence(storedPlans{c}, c.opt.Version, c.opt.Rules.Silences)
}

// The state metrics (package statemetrics, docs/metrics.md) are set from what
// each pass observed, handed over at its end (exportState), and from the
// cycles apply finishes and the drains it starts.

// exportState hands the state metrics what the pass that observed s saw.
func (c *Coordinator) exportState(s *snapshot) {
	in := stateInput(s, c.stateHosts)
	c.stateHosts = in.Hosts
	c.metrics.State.Export(in)
}

// stateInput is what the state metrics say of s, its hosts in buf's array
// (reused from pass to pass: Export keeps nothing of them).
func stateInput(s *snapshot, buf []statemetrics.Host) statemetrics.State {
	hosts := buf[:0]
	detectErrors := 0
	for _, name := range s.names {
		hv := s.hosts[name]
		h := statemetrics.Host{Name: name, Group: hv.group, Phase: store.PhaseIdle, HasRecord: hv.rec != nil}
		if hv.rec != nil {
			h.RebootRequired = hv.rec.RebootRequired
			if hv.rec.DetectError != "" {
				detectErrors++
			}
		}
		if p := s.plans[name]; planUnderWay(p) {
			h.Phase, h.RequestedAt = p.Phase, p.RequestedAt
		}
		hosts = append(hosts, h)
	}
	var paused map[string]bool
	for g := range s.control.GroupPauses { // in force: observe took them so
		if paused == nil {
			paused = map[string]bool{}
		}
		paused[g] = true
	}
	return statemetrics.State{Now: s.now, Hosts: hosts, Groups: s.statuses, Paused: s.control.Paused, AgentsMissing: len(s.missing),
		DetectErrors: detectErrors, PausedGroups: paused, PausedHosts: len(s.control.HostPauses)}
}

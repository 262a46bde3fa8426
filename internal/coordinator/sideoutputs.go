package coordinator

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/silence"
	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/store"
)

// After each pass the coordinator hands the stored state to the notifier and
// the node metadata publisher, which derive their work from all of it (every
// plan, every host). Over a cluster where nothing moved both would get the same
// state again at every pass, a copy of every plan and of every node's metadata.
// They are handed over only when what they
// derive from changed: the plans (c.plansGen counts every write and load) and
// the pause flag for the notifier; the metadata itself, compared with what was
// last handed, for the publisher.
type sideOutputs struct {
	// notifyGen and notifyPause: the plans' generation and the pause flag last
	// handed to the notifier (notified: at all, this term).
	notifyGen   uint64
	notifyPause notify.Pause
	notified    bool
	// notifyHalts: the halts last handed to the notifier, as a key.
	notifyHalts string
	// notifyFreezes: the freezes in force last handed to the notifier, as a
	// key.
	notifyFreezes string
	// meta: the metadata last handed to the publisher (metaHanded: at all,
	// this term).
	meta       map[string]nodemeta.Meta
	metaHanded bool
	// silenceGen and silenceVersion: the plans' generation and the policy
	// version last handed to the silence keeper (silenced: at all, this
	// term).
	silenceGen     uint64
	silenceVersion int
	silenced       bool
}

// silenceDue reports whether the silence keeper has not been handed these
// plans under this policy yet, and takes them as handed.
func (h *sideOutputs) silenceDue(gen uint64, version int) bool {
	if h.silenced && h.silenceGen == gen && h.silenceVersion == version {
		return false
	}
	h.silenceGen, h.silenceVersion, h.silenced = gen, version, true
	return true
}

// notifyDue reports whether the notifier has not been handed these plans and
// this pause flag yet, and takes them as handed.
func (h *sideOutputs) notifyDue(gen uint64, pause notify.Pause) bool {
	if h.notified && h.notifyGen == gen && h.notifyPause.Paused == pause.Paused &&
		h.notifyPause.At.Equal(pause.At) && h.notifyPause.Reason == pause.Reason {
		return false
	}
	h.notifyGen, h.notifyPause, h.notified = gen, pause, true
	return true
}

// haltsDue reports whether the notifier has not been handed these halts yet,
// and takes them as handed.
func (h *sideOutputs) haltsDue(halts []notify.Halt) bool {
	var b strings.Builder
	for _, x := range halts {
		fmt.Fprintf(&b, "%s@%d;", x.Scope, x.Since.UnixNano())
	}
	if b.String() == h.notifyHalts {
		return false
	}
	h.notifyHalts = b.String()
	return true
}

// freezesDue reports whether the notifier has not been handed these freezes
// in force yet, and takes them as handed.
func (h *sideOutputs) freezesDue(fs []notify.Freeze) bool {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s@%d-%d:%s;", f.Name, f.Start.UnixNano(), f.End.UnixNano(), strings.Join(f.Groups, ","))
	}
	if b.String() == h.notifyFreezes {
		return false
	}
	h.notifyFreezes = b.String()
	return true
}

// metaDue reports whether the publisher has not been handed this metadata
// yet, and takes it as handed.
func (h *sideOutputs) metaDue(want map[string]nodemeta.Meta) bool {
	if h.metaHanded && maps.EqualFunc(h.meta, want, sameMeta) {
		return false
	}
	h.meta, h.metaHanded = want, true
	return true
}

// sameMeta reports whether a and b say the same.
func sameMeta(a, b nodemeta.Meta) bool {
	return a.Phase == b.Phase && a.RebootRequired == b.RebootRequired && a.LastReboot.Equal(b.LastReboot) &&
		a.Steering == b.Steering && a.Next == b.Next && a.Cordoning == b.Cordoning && a.Cordoned == b.Cordoned && a.Operator == b.Operator
}

// forget makes the next pass hand everything over (a new term: the notifier
// and the publisher start afresh).
func (h *sideOutputs) forget() { *h = sideOutputs{} }

// besideTheLoop is a side output's writer: it runs while this coordinator
// leads, each of its writes fenced by the leader's lease like a drain.
type besideTheLoop interface {
	Run(ctx context.Context, fence func(context.Context) error)
}

// startBeside runs the side outputs configured for this term; wg waits for
// them.
func (c *Coordinator) startBeside(ctx context.Context, wg *sync.WaitGroup) {
	for _, r := range []besideTheLoop{c.opt.Notifier, c.opt.NodeMeta, c.opt.Silencer} {
		if r == nil {
			continue
		}
		wg.Go(func() { r.Run(ctx, election.CheckLease) })
	}
}

// Notifier sends the notifications of the rollout (*notify.Notifier). It derives
// the events from the stored state the coordinator hands it after every pass, and
// runs only while this coordinator leads: a send is fenced by the leader's lease
// like a drain.
type Notifier interface {
	Observe(notify.State)
	Run(ctx context.Context, fence func(context.Context) error)
}

// notifyPass hands the notifier the plans as stored (the cache holds only plans
// read or written), the pause flag as read, the halts and the freezes in
// force at the pass's time now: before the pass's decisions (the plans another
// leader stored may be about to move on) and after them. After a conflict the
// cache is dropped: the next pass reads the plans again and hands them over
// then. The same plans, pause flag, halts and freezes as last handed over are
// not handed over again (sideoutputs.go); a freeze starting or ending changes
// the freezes, and a pass runs then (wake.go).
func (c *Coordinator) notifyPass(ctl store.Control, now time.Time) {
	if c.opt.Notifier == nil {
		return
	}
	pause := notify.Pause{Paused: ctl.Paused, At: ctl.PausedAt, Reason: ctl.PauseReason}
	halts := c.halts.notified
	freezes := c.freezesInForce(now)
	c.mu.Lock()
	if c.plans == nil {
		c.mu.Unlock()
		return
	}
	due := c.sideOutputs.notifyDue(c.plansGen, pause)
	due = c.sideOutputs.haltsDue(halts) || due
	due = c.sideOutputs.freezesDue(freezes) || due
	if !due {
		c.mu.Unlock()
		return
	}
	plans := make([]store.Plan, 0, len(c.plans))
	for _, p := range c.plans {
		plans = append(plans, p)
	}
	c.mu.Unlock()
	sort.Slice(plans, func(i, j int) bool { return plans[i].Host < plans[j].Host })
	c.opt.Notifier.Observe(notify.State{Plans: plans, Pause: pause, Halts: halts, Freezes: freezes, At: now})
}

// freezesInForce returns the policy's freezes in force at now, as the
// notifier takes them.
func (c *Coordinator) freezesInForce(now time.Time) []notify.Freeze {
	var out []notify.Freeze
	for _, f := range policy.InForce(c.allGroups(), now) {
		out = append(out, notify.Freeze{Name: f.Name, Groups: f.Groups, Start: f.Start, End: f.End})
	}
	return out
}

// MetaPublisher publishes each host's phase, need and last reboot as Nomad
// dynamic node metadata (*nodemeta.Publisher), beside the reconcile loop and
// only while this coordinator leads.
type MetaPublisher interface {
	Observe(map[string]nodemeta.Meta)
	Run(ctx context.Context, fence func(context.Context) error)
}

// publishMeta hands the publisher the metadata wanted on every ready node of a
// host with a record, after this pass: its phase as stored, its agent's word on
// the need, the end of its last reboot by rollboot, whether it is next in line
// (the policy's node_meta.next_in_line, over the pending hosts admission would
// consider: policy.NextInLine) and the operator's keys for its phase
// (nodemeta.OperatorKeys), and whether its host's plan holds a cordon (the
// policy's node_meta.cordon_next). A node that is not ready is left out (its client
// would not answer); it gets its metadata once it is. So is a rebooting
// host's node, which is about to go down. The same metadata as
// last handed over is not handed over again (sideoutputs.go).
func (c *Coordinator) publishMeta(s *snapshot) {
	if c.opt.NodeMeta == nil {
		return
	}
	rules := c.opt.Rules.MetaKeys
	var next map[string]bool
	if rules.NextInLine > 0 {
		queue := admissionQueue(s)
		reqs := make([]policy.Request, len(queue))
		for i, q := range queue {
			reqs[i] = q.Request
		}
		next = policy.NextInLine(reqs, rules.NextInLine)
	}
	want := map[string]nodemeta.Meta{}
	c.mu.Lock()
	plans := c.plans
	for name, hv := range s.hosts {
		if hv.node == nil || hv.node.Status != "ready" || hv.rec == nil {
			continue
		}
		p, ok := plans[name]
		if !ok {
			p = s.plans[name]
		}
		phase := p.Phase
		if phase == "" {
			phase = store.PhaseIdle
		}
		if phase == store.PhaseRebooting {
			// Its agent announced the reboot: the client is going down, and
			// a write forwarded to it would fail or be lost with it. The
			// node keeps drained (the operator's keys are the same) until
			// it is back, rejoining.
			continue
		}
		want[hv.node.ID] = nodemeta.Meta{Phase: phase, RebootRequired: hv.rec.RebootRequired, LastReboot: p.LastCompleted,
			Steering: rules.NextInLine > 0, Next: next[name] && phase == store.PhasePending, // granted this pass: not next
			Cordoning: rules.CordonNext > 0, Cordoned: p.CordonNode == hv.node.ID,
			Operator: nodemeta.EncodeKeys(nodemeta.OperatorKeys(rules.BeforeDrain, rules.AfterRejoin, phase, !p.LastCompleted.IsZero()))}
	}
	c.mu.Unlock()
	if c.sideOutputs.metaDue(want) {
		c.opt.NodeMeta.Observe(want)
	}
}

// Silencer keeps an Alertmanager silence for each host out for its reboot
// (*silence.Keeper). It decides from the plans and the groups' silence rules
// the coordinator hands it after every pass, and runs only while this
// coordinator leads: a write is fenced by the leader's lease like a drain. Its
// failures never hold the rollout.
type Silencer interface {
	Observe(silence.State)
	Run(ctx context.Context, fence func(context.Context) error)
}

// silencePass hands the silence keeper the plans as stored, each group's
// silence rules and the Alertmanager to write to, after the pass. The same
// plans under the same policy as last handed over are not handed over again
// (sideoutputs.go): the keeper's own timer extends and ends the silences.
func (c *Coordinator) silencePass() {
	if c.opt.Silencer == nil {
		return
	}
	c.mu.Lock()
	if c.plans == nil || !c.sideOutputs.silenceDue(c.plansGen, c.opt.Version) {
		c.mu.Unlock()
		return
	}
	plans := maps.Clone(c.plans)
	c.mu.Unlock()
	byGroup := map[string]silence.Rules{}
	for _, g := range c.opt.Groups {
		byGroup[g.Name] = g.Options.Silence
	}
	def := c.opt.DefaultOptions.Silence
	c.opt.Silencer.Observe(silence.State{
		Plans: plans,
		Rules: func(group string) silence.Rules {
			if r, ok := byGroup[group]; ok {
				return r
			}
			return def
		},
		AlertmanagerURL: c.opt.Alerts.AlertmanagerURL,
		Timeout:         c.opt.Alerts.Timeout,
	})
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
			h.Phase, h.RequestedAt = hostPhase(p), p.RequestedAt
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

// hostPhase is the phase of a host's plan, idle without one.
func hostPhase(p store.Plan) string {
	if p.Phase == "" {
		return store.PhaseIdle
	}
	return p.Phase
}

// slotFreed notes that a cycle of group ended at at, freeing a slot of the
// group (apply, from the plan writes side by side: under c.mu).
func (c *Coordinator) slotFreed(group string, at time.Time) {
	if at.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed == nil {
		c.freed = map[string]time.Time{}
	}
	c.freed[group] = at
}

// drainStarted observes the slot hand-off of a drain granted now to a host of
// group that asked at requested: from the later of its asking and the last
// freeing of a slot of the group (slotFreed). The first drain of a group after
// the coordinator starts leading is not observed (it did not see the slot
// free).
func (c *Coordinator) drainStarted(group string, requested, now time.Time) {
	c.mu.Lock()
	freed, ok := c.freed[group]
	delete(c.freed, group)
	c.mu.Unlock()
	if ok {
		c.metrics.State.HandOff(freed, requested, now)
	}
}

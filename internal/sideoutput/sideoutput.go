// Package sideoutput hands the leading coordinator's stored state, after each
// pass, to the writers that run beside its loop (the notifier, the node
// metadata publisher and the silence keeper), each only when what it derives
// from changed.
package sideoutput

import (
	"context"
	"iter"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/silence"
	"github.com/rollboot/rollboot/internal/store"
)

// After each pass the coordinator hands the stored state to the notifier and
// the node metadata publisher, which derive their work from all of it (every
// plan, every host). Over a cluster where nothing moved both would get the same
// state again at every pass, a copy of every plan and of every node's metadata.
// They are handed over only when what they derive from changed: the plans (the
// generation Plans gives counts every write and load) and the pause flag for
// the notifier; the metadata itself, compared with what was last handed, for
// the publisher.

// Notifier sends the notifications of the rollout (*notify.Notifier). It derives
// the events from the stored state the coordinator hands it after every pass, and
// runs only while this coordinator leads: a send is fenced by the leader's lease
// like a drain.
type Notifier interface {
	Observe(notify.State)
	Run(ctx context.Context, fence func(context.Context) error)
}

// MetaPublisher publishes each host's phase, need and last reboot as Nomad
// dynamic node metadata (*nodemeta.Publisher), beside the reconcile loop and
// only while this coordinator leads.
type MetaPublisher interface {
	Observe(map[string]nodemeta.Meta)
	Run(ctx context.Context, fence func(context.Context) error)
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

// Plans is the coordinator's view of the plans it stored: With runs fn with
// them (nil: none loaded in this term) and their generation, which moves at
// every write and load, under whatever guards them.
type Plans interface {
	With(fn func(plans map[string]store.Plan, gen uint64))
}

// Outputs are the side outputs configured (each nil: off) and what was last
// handed to each in this term.
type Outputs struct {
	Notifier Notifier
	NodeMeta MetaPublisher
	Silencer Silencer
	last     handed
}

// besideTheLoop is a side output's writer: it runs while this coordinator
// leads, each of its writes fenced by the leader's lease like a drain.
type besideTheLoop interface {
	Run(ctx context.Context, fence func(context.Context) error)
}

// Start runs the side outputs configured for this term, each of their writes
// fenced by the leader's lease like a drain; wg waits for them.
func (o *Outputs) Start(ctx context.Context, wg *sync.WaitGroup) {
	for _, r := range []besideTheLoop{o.Notifier, o.NodeMeta, o.Silencer} {
		if r == nil {
			continue
		}
		wg.Go(func() { r.Run(ctx, election.CheckLease) })
	}
}

// Forget makes the next pass hand everything over (a new term: the notifier
// and the publisher start afresh).
func (o *Outputs) Forget() { o.last = handed{} }

// Notify hands the notifier the plans as stored (plans holds only plans read
// or written), the pause flag as read, the halts, and the freezes of groups
// in force at the pass's time now. After a conflict the coordinator drops its
// plans: the next pass reads them again and hands them over then. The same
// plans, pause flag, halts and freezes as last handed over are not handed
// over again; a freeze starting or ending changes the freezes, and a pass
// runs then.
func (o *Outputs) Notify(plans Plans, ctl store.Control, halts []notify.Halt, groups func() []policy.Group, now time.Time) {
	if o.Notifier == nil {
		return
	}
	pause := notify.Pause{Paused: ctl.Paused, At: ctl.PausedAt, Reason: ctl.PauseReason}
	freezes := freezesInForce(groups(), now)
	var list []store.Plan
	plans.With(func(stored map[string]store.Plan, gen uint64) {
		if stored == nil {
			return
		}
		due := o.last.notifyDue(gen, pause)
		due = o.last.haltsDue(halts) || due
		due = o.last.freezesDue(freezes) || due
		if !due {
			return
		}
		list = make([]store.Plan, 0, len(stored))
		for _, p := range stored {
			list = append(list, p)
		}
	})
	if list == nil {
		return
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Host < list[j].Host })
	o.Notifier.Observe(notify.State{Plans: list, Pause: pause, Halts: halts, Freezes: freezes, At: now})
}

// freezesInForce returns the freezes of groups in force at now, as the
// notifier takes them.
func freezesInForce(groups []policy.Group, now time.Time) []notify.Freeze {
	var out []notify.Freeze
	for _, f := range policy.InForce(groups, now) {
		out = append(out, notify.Freeze{Name: f.Name, Groups: f.Groups, Start: f.Start, End: f.End})
	}
	return out
}

// MetaRules are the policy's node_meta block: how many hosts of each group
// are marked next in line (0: none, rollboot_next removed), and the
// operator's keys written before a drain and after the host is back
// (nodemeta.OperatorKeys).
type MetaRules struct {
	NextInLine int
	// CordonNext: how many hosts at the head of each group's line have their
	// node marked ineligible before their drain (admission.Cordons).
	CordonNext               int
	BeforeDrain, AfterRejoin map[string]string
}

// MetaHost is what the publisher's metadata says of one host: its node, its
// record and its plan as the pass read it (a plan the coordinator stored
// since takes its place).
type MetaHost struct {
	Name string
	Node *phase.NodeView
	Rec  *store.HostRecord
	Plan store.Plan
}

// PublishMeta hands the publisher the metadata wanted on every ready node of
// a host with a record, after this pass: its phase as stored, its agent's word
// on the need, the end of its last reboot by rollboot, whether it is next in
// line (rules.NextInLine, over the pending hosts admission would consider,
// queue: policy.NextInLine) and the operator's keys for its phase
// (nodemeta.OperatorKeys), and whether its host's plan holds a cordon
// (rules.CordonNext). A node that is not ready is left out (its client would
// not answer); it gets its metadata once it is. So is a rebooting host's
// node, which is about to go down. The same metadata as last handed over is
// not handed over again.
func (o *Outputs) PublishMeta(plans Plans, rules MetaRules, hosts iter.Seq[MetaHost], queue func() []admission.Pending) {
	if o.NodeMeta == nil {
		return
	}
	var next map[string]bool
	if rules.NextInLine > 0 {
		q := queue()
		reqs := make([]policy.Request, len(q))
		for i, p := range q {
			reqs[i] = p.Request
		}
		next = policy.NextInLine(reqs, rules.NextInLine)
	}
	want := map[string]nodemeta.Meta{}
	plans.With(func(stored map[string]store.Plan, _ uint64) {
		for h := range hosts {
			if h.Node == nil || h.Node.Status != "ready" || h.Rec == nil {
				continue
			}
			p, ok := stored[h.Name]
			if !ok {
				p = h.Plan
			}
			ph := p.Phase
			if ph == "" {
				ph = store.PhaseIdle
			}
			if ph == store.PhaseRebooting {
				// Its agent announced the reboot: the client is going down, and
				// a write forwarded to it would fail or be lost with it. The
				// node keeps drained (the operator's keys are the same) until
				// it is back, rejoining.
				continue
			}
			want[h.Node.ID] = nodemeta.Meta{Phase: ph, RebootRequired: h.Rec.RebootRequired, LastReboot: p.LastCompleted,
				Steering: rules.NextInLine > 0, Next: next[h.Name] && ph == store.PhasePending, // granted this pass: not next
				Cordoning: rules.CordonNext > 0, Cordoned: p.CordonNode == h.Node.ID,
				Operator: nodemeta.EncodeKeys(nodemeta.OperatorKeys(rules.BeforeDrain, rules.AfterRejoin, ph, !p.LastCompleted.IsZero()))}
		}
	})
	if o.last.metaDue(want) {
		o.NodeMeta.Observe(want)
	}
}

// SilenceRules are the silence settings the keeper is handed with the plans.
type SilenceRules struct {
	// ByGroup: each configured group's rules; Default: those of any other.
	ByGroup         map[string]silence.Rules
	Default         silence.Rules
	AlertmanagerURL string
	Timeout         time.Duration
}

// Silence hands the silence keeper the plans as stored, each group's silence
// rules and the Alertmanager to write to (rules, asked only when handed),
// after the pass. The same plans under the same policy version as last
// handed over are not handed over again: the keeper's own timer extends and
// ends the silences.
func (o *Outputs) Silence(plans Plans, version int, rules func() SilenceRules) {
	if o.Silencer == nil {
		return
	}
	var cloned map[string]store.Plan
	plans.With(func(stored map[string]store.Plan, gen uint64) {
		if stored == nil || !o.last.silenceDue(gen, version) {
			return
		}
		cloned = maps.Clone(stored)
	})
	if cloned == nil {
		return
	}
	r := rules()
	o.Silencer.Observe(silence.State{
		Plans: cloned,
		Rules: func(group string) silence.Rules {
			if g, ok := r.ByGroup[group]; ok {
				return g
			}
			return r.Default
		},
		AlertmanagerURL: r.AlertmanagerURL,
		Timeout:         r.Timeout,
	})
}

// Package admission decides which pending hosts may be taken out of service
// now and why each other one waits: a pure function of an input the
// coordinator builds once per pass, which also says what it still needs read
// before it can decide (Needs).
package admission

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// The order of the checks: the group budgets and windows (package policy),
// then rollboot's own rules, in this order, for each host the budgets offer a
// slot to (first come, first served; a host a rule holds takes no slot, which
// is offered to the next host in line):
//   - a coordinator candidate is kept in service;
//   - a host whose agent cannot tell which servers run on it is held;
//   - at most one server of each cluster is out at once;
//   - no Vault server goes while another Vault server is sealed;
//   - every cluster of the host's servers passes its pre-reboot gate;
//   - the nodes left can take the allocations the drain moves (the capacity
//     gate, with the hosts admitted before it);
//   - the host's agent, when it runs as a Nomad system job, runs on its node.
//
// Before any slot is offered, the alerts hold every host (fleet-wide), a group
// settling after a host came back holds its hosts, a closed health gate holds
// the hosts of the groups it guards, and the workload blockers hold the hosts
// of a busy node or pool.

// Rules are the configuration admission depends on.
type Rules struct {
	Groups        []policy.Group // the default group first, then the configured ones
	DrainDeadline time.Duration  // a window must leave room for a drain to finish
	// GroupDeadlines are the groups with a drain deadline of their own.
	GroupDeadlines map[string]time.Duration
	Gates          bool // quorum gates are configured
	// Hold, when set, admits nobody and is every pending host's reason: the
	// stored policy cannot be used.
	Hold phase.WaitReason
	// Alerts, Workloads, Capacity: the gates that read something before they
	// decide are on.
	Alerts, Workloads, Capacity bool
	// HealthGates are the policy's health gates, in the policy's order.
	HealthGates []healthgate.Gate
	// Approval: the groups whose hosts need an approval (approval.go).
	Approval ApprovalRules
	// CordonNext: how many hosts at the head of each group's line have
	// their node cordoned before their drain (cordon.go; 0: none).
	CordonNext int
	// Rollout caps the hosts out and the drains started per hour of all
	// groups together.
	Rollout policy.RolloutBudget
}

// DrainDeadlineOf is the drain deadline of the group named name.
func (r Rules) DrainDeadlineOf(name string) time.Duration {
	if d, ok := r.GroupDeadlines[name]; ok {
		return d
	}
	return r.DrainDeadline
}

// Pending is a pending host that may compete for a slot: past its backoff,
// with a record, a ready node not drained by someone else (or no node), and an
// agent that runs.
type Pending struct {
	policy.Request
	Rec  *store.HostRecord
	Node *phase.NodeView // nil: the host has no Nomad node
	// Pool is its node's pool ("" without a node).
	Pool string
	// AwaitingSince: since when it awaits its approval (its plan's; zero:
	// it does not).
	AwaitingSince time.Time
}

// GroupCount is what admission counts of one group.
type GroupCount struct {
	// Size: its nodes; Unavailable: those not ready or not eligible that no
	// cycle of rollboot's holds; Active: its hosts out for rollboot.
	Size, Unavailable, Active int
	// LastBack is the host of the group that came back last, at LastBackAt.
	LastBack   string
	LastBackAt time.Time
}

// Input is everything admission decides on. Alerts, WorkloadHolds, Capacity
// and Jobs are read only when Admit asks for them (Needs).
type Input struct {
	Now         time.Time
	Rules       Rules
	Paused      bool
	PauseReason string
	// Queue: the hosts that compete for a slot.
	Queue  []Pending
	Groups map[string]GroupCount
	// Spare: the coordinator candidates in service; ServersOut: each server
	// cluster (product/cluster) with a server out for rollboot, to that
	// server's host; Sealed: the hosts whose Vault server is sealed.
	Spare      int
	ServersOut map[string]string
	Sealed     []string
	// Missing: the hosts whose agent is known not to run, and why.
	Missing  map[string]string
	Clusters map[string]health.ClusterHealth

	// Alerts: what the alerts mean for new drains (nil: not read).
	Alerts *alertgate.Verdict
	// HealthGates: each health gate's verdict, by name (nil: not read).
	HealthGates map[string]healthgate.Verdict
	// WorkloadHolds: why the workload blockers hold a queued host, by host
	// read for (the zero reason: not held; a host missing: not read, asked
	// for when its group has a slot free: slotFree).
	WorkloadHolds map[string]phase.WaitReason
	// Capacity: what the capacity gate read (nil: nothing yet).
	Capacity *Capacity
	// CapacityHolds: the capacity gate's holds kept from the last pass
	// (Result.CapacityHolds), by host.
	CapacityHolds map[string]CapacityHold
	// Jobs: the system jobs running on the node of each host admitted, read
	// once it is (a host missing has not been read).
	Jobs map[string][]string
	// Approvals: the operators' approvals valid now, by host (`rollboot
	// approve`); Webhook: the approval webhook's answers to the hosts'
	// current requests, by host (a host missing was not asked).
	Approvals map[string]store.Approval
	Webhook   map[string]WebhookAnswer

	// The calendar (calendar.go). PauseUntil: when the rollout-wide pause
	// ends (zero: when resumed). GroupPauses and HostPauses: the operator's
	// pauses of one group or host, by name. OptOut: the hosts whose node's
	// meta rollboot_pause holds them, with its value. Urgent: the hosts whose
	// request skips their group's windows and freezes.
	PauseUntil              time.Time
	GroupPauses, HostPauses map[string]store.Pause
	OptOut                  map[string]string
	Urgent                  map[string]bool

	// WaveHolds: why package wave holds a queued host (its canaries, the
	// groups its group follows), and WaveRecheck when a soak ends.
	WaveHolds   map[string]phase.WaitReason
	WaveRecheck time.Time

	// Halts: the scopes halted by their failure budget (policy.HaltState);
	// HaltsUnknown: why the halt state cannot be read ("" when it can).
	Halts        map[string]policy.Halt
	HaltsUnknown string
	// DrainStarts: when the drains of the last hour started, every group's
	// (the plans' DrainStarts), for Rules.Rollout.
	DrainStarts []time.Time
}

// Result is what admission decided.
type Result struct {
	Admitted map[string]bool
	// Wait: why each pending host not admitted waits.
	Wait map[string]phase.WaitReason
	// RecheckAt: when admission may decide otherwise with nothing else
	// changing (a group done settling, a capacity or workload hold read again;
	// zero: never).
	RecheckAt time.Time
	// Approved: the approval of each host admitted in a group that needs
	// one (approval.go); HoldsSlot: the hosts awaiting approval that keep
	// their group's slot (ApprovalVerdict.KeepsSlot).
	Approved  map[string]Approved
	HoldsSlot map[string]bool
	// Cordon: the hosts next in line whose node is to be ineligible before
	// their drain; NoCordon: why each other host next in line is not
	// (cordon.go).
	Cordon   map[string]bool
	NoCordon map[string]string
	// CapacityHolds: the capacity gate's holds to keep for the next pass
	// (Input.CapacityHolds): those it settled in this one after reading all
	// it could, and the kept ones that still stood.
	CapacityHolds map[string]CapacityHold
}

// Needs is what admission still needs read before it can decide.
type Needs struct {
	// Alerts: the alerts, for a queue that is not empty.
	Alerts bool
	// HealthGates: the health gates, for a queue that is not empty.
	HealthGates bool
	// Workloads: the queued hosts the workload blockers must read for.
	Workloads []string
	// Capacity: what the capacity gate lacks.
	Capacity CapacityNeeds
	// Jobs: the hosts admitted whose node's system jobs are not read yet.
	Jobs []string
	// Webhook: the hosts awaiting approval the approval webhook must be
	// asked about.
	Webhook []string
}

// None reports whether nothing is needed: the result is final.
func (n Needs) None() bool {
	return !n.Alerts && !n.HealthGates && len(n.Workloads) == 0 && n.Capacity.None() && len(n.Jobs) == 0 && len(n.Webhook) == 0
}

// How long a hold by the capacity gate, a workload blocker or a server gate
// lasts before a pass looks again: room freed, a deployment finished
// elsewhere, or a server cluster healthy again changes nothing in Nomad's node
// list, so no watch wakes a pass for it. Autopilot recomputes the servers'
// health every few seconds (raft-autopilot's update interval).
const (
	CapacityRecheck   = 5 * time.Second
	WorkloadRecheck   = 5 * time.Second
	ServerGateRecheck = 5 * time.Second
)

// Admit decides which pending hosts get a slot now, or says what it needs read
// first.
func Admit(in Input) (Result, Needs) {
	out := Result{Admitted: map[string]bool{}, Wait: map[string]phase.WaitReason{}, Cordon: map[string]bool{}, NoCordon: map[string]string{}}
	if !in.Rules.Hold.IsZero() {
		for _, p := range in.Queue {
			out.Wait[p.Host] = in.Rules.Hold
		}
		return out, Needs{}
	}
	queue, needs := holds(in, &out)
	if !needs.None() {
		return out, needs
	}
	a := admitter{in: in, out: &out, spare: in.Spare, serversOut: maps.Clone(in.ServersOut), index: map[string]int{},
		rolloutOut: hostsOut(in), starts: slices.Clone(in.DrainStarts)}
	if a.serversOut == nil {
		a.serversOut = map[string]string{}
	}
	for i, p := range in.Queue {
		a.index[p.Host] = i
	}
	statuses := Statuses(in)
	a.free = map[string]int{}
	for _, st := range statuses {
		a.free[st.Group.Name] = st.Free()
	}
	rest, urgent := splitUrgent(in, statuses, queue)
	adm := policy.AdmitInOrder(statuses, a.awaitingFirst(policy.InQueueOrder(rest)), a.accept)
	if len(urgent) > 0 {
		u := urgentRound(in, statuses, urgent, adm, a.accept)
		adm.Admitted, adm.Waiting = append(adm.Admitted, u.Admitted...), append(adm.Waiting, u.Waiting...)
	}
	out.RecheckAt = phase.Earliest(out.RecheckAt, calendarRecheck(in, statuses, queue))
	for _, w := range adm.Waiting {
		if why := a.stillAwaiting(w); !why.IsZero() {
			out.Wait[w.Host] = why // approval.go
			continue
		}
		if w.ForSlot {
			out.Wait[w.Host] = phase.WaitFor(phase.WaitQueued, strconv.Quote(w.Group))
			continue
		}
		out.Wait[w.Host] = phase.WaitFor(phase.WaitGroupBudget, w.Reason)
	}
	for name, why := range in.Missing {
		out.Wait[name] = phase.WaitFor(phase.WaitAgentMissing, why)
	}
	a.cordons()
	return out, a.needs
}

// holds takes out of the queue the hosts the alerts, a settling group or a
// workload blocker hold, with why they wait; or says what must be read first.
func holds(in Input, out *Result) ([]policy.Request, Needs) {
	if len(in.Queue) == 0 {
		return nil, Needs{}
	}
	if in.Rules.Alerts && in.Alerts == nil {
		return nil, Needs{Alerts: true}
	}
	if in.Alerts != nil {
		if why := AlertHold(*in.Alerts); !why.IsZero() {
			for _, p := range in.Queue {
				out.Wait[p.Host] = why
			}
			return nil, Needs{}
		}
	}
	if len(in.Rules.HealthGates) > 0 && in.HealthGates == nil {
		return nil, Needs{HealthGates: true}
	}
	settling, until := settle(in)
	room := slotFree(in)
	var queue []policy.Request
	var workloads []string
	for _, p := range hostHolds(in, in.Queue, out) {
		if why := HaltHold(in, p.Group); !why.IsZero() {
			out.Wait[p.Host] = why
			continue
		}
		if why, ok := settling[p.Group]; ok {
			out.Wait[p.Host] = why
			out.RecheckAt = phase.Earliest(out.RecheckAt, until[p.Group])
			continue
		}
		if why, at := HealthGateHold(in, p.Group); !why.IsZero() {
			out.Wait[p.Host] = why
			out.RecheckAt = phase.Earliest(out.RecheckAt, at)
			continue
		}
		if why := in.WaveHolds[p.Host]; !why.IsZero() {
			out.Wait[p.Host] = why
			out.RecheckAt = phase.Earliest(out.RecheckAt, in.WaveRecheck)
			continue
		}
		if in.Rules.Workloads && p.Pool != "" && (room == nil || room[p.Group]) {
			why, read := in.WorkloadHolds[p.Host]
			if !read {
				workloads = append(workloads, p.Host)
				continue
			}
			if !why.IsZero() {
				out.Wait[p.Host] = why
				out.RecheckAt = phase.Earliest(out.RecheckAt, in.Now.Add(WorkloadRecheck))
				continue
			}
		}
		queue = append(queue, p.Request)
	}
	return queue, Needs{Workloads: workloads}
}

// slotFree gives, by group, whether one of its hosts could take a slot in
// this admission (policy.GroupStatus.SlotFree). The workload blockers are
// read only for the hosts of such groups: the others wait for a slot
// whatever the blockers say (AdmitInOrder, and urgentRound, which skips a
// group's hold but not its slots), and a read for them would be a list of
// the cluster's blocked evaluations in every pass, most of which have no
// slot to give. A host of a group whose slot frees later in the pass is read
// for then (regrantFreed admits again, and asks for the hosts not read).
// With cordon_next, nil: every host is read for, since the cordons go to the
// hosts that wait for a slot alone, not to those a blocker holds (cordons).
func slotFree(in Input) map[string]bool {
	if in.Rules.CordonNext > 0 {
		return nil
	}
	out := map[string]bool{}
	for _, gs := range Statuses(in) {
		if _, dup := out[gs.Group.Name]; !dup {
			out[gs.Group.Name] = gs.SlotFree()
		}
	}
	return out
}

// HealthGateHold is why the health gates hold the drains of group (zero:
// they do not), and when the gate that holds them is read again: the first
// closed gate guarding the group, in the policy's order. A gate not read is
// closed (fail closed).
func HealthGateHold(in Input, group string) (phase.WaitReason, time.Time) {
	for _, g := range in.Rules.HealthGates {
		if !g.Guards(group) {
			continue
		}
		v, ok := in.HealthGates[g.Name]
		if !ok {
			v = healthgate.Verdict{Reason: fmt.Sprintf("health gate %q: not read", g.Name)}
		}
		if !v.Open {
			return phase.WaitFor(phase.WaitHealthGate, v.Reason), in.Now.Add(g.Recheck)
		}
	}
	return phase.WaitReason{}, time.Time{}
}

// HaltHold is why the failure budgets hold the drains of group (zero: they
// do not): the rollout or the group is halted until an operator resumes it,
// or the halt state cannot be read (fail closed: any scope may be halted).
func HaltHold(in Input, group string) phase.WaitReason {
	if in.HaltsUnknown != "" {
		return phase.WaitFor(phase.WaitHaltUnknown, in.HaltsUnknown)
	}
	if h, ok := policy.HaltOf(in.Halts, group); ok {
		return phase.WaitFor(phase.WaitHalted, h.Text())
	}
	return phase.WaitReason{}
}

// hostsOut counts the hosts out for rollboot, every group's.
func hostsOut(in Input) int {
	n := 0
	for _, c := range in.Groups {
		n += c.Active
	}
	return n
}

// AlertHold is why the verdict holds every new start (zero: it does not).
func AlertHold(v alertgate.Verdict) phase.WaitReason {
	switch {
	case v.Unknown != "" && len(v.Blocking) > 0:
		return phase.WaitFor(phase.WaitAlertsUnknown, fmt.Sprintf("%s (and firing: %s)", v.Unknown, v.Names()))
	case v.Unknown != "":
		return phase.WaitFor(phase.WaitAlertsUnknown, v.Unknown)
	case len(v.Blocking) > 0:
		return phase.WaitFor(phase.WaitAlerts, v.Names())
	}
	return phase.WaitReason{}
}

// settle says why the hosts of each group settling after one of its hosts came
// back (group.settle) wait, and until when.
func settle(in Input) (map[string]phase.WaitReason, map[string]time.Time) {
	why, until := map[string]phase.WaitReason{}, map[string]time.Time{}
	for _, g := range in.Rules.Groups {
		c := in.Groups[g.Name]
		if t, ok := policy.SettleUntil(g, c.LastBackAt, in.Now); ok {
			why[g.Name] = phase.WaitFor(phase.WaitSettle, fmt.Sprintf("group %q starts its next host at %s, %s after %s came back",
				g.Name, t.UTC().Format(time.RFC3339), g.Settle, c.LastBack))
			until[g.Name] = t
		}
	}
	return why, until
}

// Statuses are the groups as the budgets see them: each one's size, active
// hosts and otherwise-unavailable nodes, and a hold when it is paused (the
// rollout or the group) or its calendar (windows, freezes) does not allow a
// drain to start now.
func Statuses(in Input) []policy.GroupStatus {
	out := make([]policy.GroupStatus, 0, len(in.Rules.Groups))
	for _, g := range in.Rules.Groups {
		c := in.Groups[g.Name]
		gs := policy.GroupStatus{Group: g, Size: c.Size, Active: c.Active, Unavailable: c.Unavailable}
		gs.Hold = groupHold(in, g)
		out = append(out, gs)
	}
	return out
}

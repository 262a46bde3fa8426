// Package invariants checks rollboot's safety invariants (DESIGN.md) independently of
// the code under test: it reads only the emulator's event log and final state, what
// an outside observer of the Nomad cluster would see, never rollboot's own records.
package invariants

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// Spec is what the test knows about the cluster and the policy.
type Spec struct {
	// Group maps each host to its group; Concurrency bounds each group.
	Group       map[string]string
	Concurrency map[string]int
	// EligibleBefore is each client host's node eligibility before the rollout.
	EligibleBefore map[string]bool
	// Force: the drain policy allows a reboot after a drain forced at its deadline.
	Force bool
	// Reboots is how many reboots each host must have had (nil: not checked).
	Reboots map[string]int
	// Jobs are the cluster's jobs, for invariant 6 (migrate max_parallel of every
	// service group; nil: not checked).
	Jobs []nomadsim.JobSpec
}

// Final is a host's state at the end of the run.
type Final struct {
	Eligible bool
	Draining bool
	Ready    bool
	HasNode  bool
}

// FinalOf is the final state of a host whose node is n.
func FinalOf(n *api.Node) Final {
	return Final{HasNode: true, Eligible: n.SchedulingEligibility == api.NodeSchedulingEligible,
		Draining: n.DrainStrategy != nil, Ready: n.Status == api.NodeStatusReady}
}

// Violation is a broken invariant.
type Violation struct {
	Invariant int // 1..5 as numbered in DESIGN.md; 6: migrate max_parallel (migrate.go)
	Host      string
	Seq       int // the event at which it was seen (0: the final state)
	Msg       string
}

func (v Violation) String() string {
	where := "at the end"
	if v.Seq > 0 {
		where = fmt.Sprintf("at event %d", v.Seq)
	}
	return fmt.Sprintf("invariant %d, host %s, %s: %s", v.Invariant, v.Host, where, v.Msg)
}

// DrainGrantDetail is the detail of a drain's start event that names the
// grant of rollboot's that started it (the drain's meta rollboot_grant, as the
// emulator logs it); absent for a drain someone else started.
const DrainGrantDetail = "meta.rollboot_grant"

// foreignMeta reports whether a drain event carries a meta that names no grant
// of rollboot's (a drain update that sets no meta keeps the last one).
func foreignMeta(details map[string]string) bool {
	for k := range details {
		if strings.HasPrefix(k, "meta.") {
			return details[DrainGrantDetail] == ""
		}
	}
	return false
}

// hostState follows one host through the event log.
type hostState struct {
	hasNode  bool
	up       bool
	ready    bool
	eligible bool
	draining bool
	// drainDone: the last drain completed (not canceled) and no boot since.
	drainDone     bool
	drainForced   bool
	awaitReboot   bool // drained to completion and not rebooted yet
	inCycle       bool // out of service because of a drain or a reboot
	reboots       int
	eligibleStart bool
	// cordoned: made ineligible while in service, with no drain (rollboot's
	// cordon of a host next in line, node_meta.cordon_next), and neither
	// drained nor made eligible since. A cordon is not out of service (the
	// node's work runs on), so it counts against no group; one left at the
	// end breaks invariant 3.
	cordoned bool
}

// Result is what a replay found.
type Result struct {
	Violations []Violation
	// Peak is, per group, the largest number of hosts out of service at once.
	Peak map[string]int
	// Reboots counts the reboots of each host.
	Reboots map[string]int
	// MigratePeak is, per service task group ("job.group"), the largest number of
	// its allocations down at once (with Spec.Jobs).
	MigratePeak map[string]int
}

// Check replays events and returns every violation of the five invariants. Invariant
// 2 is judged from the cluster health the emulator records in each host.reboot.
// final is each host's state at the end (for invariant 3).
func Check(events []nomadsim.Event, final map[string]Final, spec Spec) Result {
	r := &replay{spec: spec, hosts: map[string]*hostState{}, byNode: map[string]string{},
		peak: map[string]int{}, over: map[string]bool{}}
	for _, e := range events {
		r.event(e)
	}
	out := r.out
	cordoned := map[string]bool{}
	for name, h := range r.hosts {
		cordoned[name] = h.cordoned
	}
	out = append(out, checkFinal(final, spec.EligibleBefore, cordoned)...)
	reboots := map[string]int{}
	for name, h := range r.hosts {
		reboots[name] = h.reboots
	}
	out = append(out, checkReboots(reboots, spec.Reboots)...)
	var migratePeak map[string]int
	if spec.Jobs != nil {
		var mv []Violation
		mv, migratePeak = checkMigrations(events, spec.Jobs)
		out = append(out, mv...)
	}
	return Result{Violations: out, Peak: r.peak, Reboots: reboots, MigratePeak: migratePeak}
}

// replay follows every host through the event log, checking invariants 1, 2, 3
// (as it happens) and 4 at each event.
type replay struct {
	spec   Spec
	hosts  map[string]*hostState
	byNode map[string]string // node ID -> host, from the events that name both
	peak   map[string]int    // per group, the most hosts out of service at once
	over   map[string]bool   // per group, over its limit at the last event
	out    []Violation
}

// event applies one event to the host it concerns, then checks its group.
func (r *replay) event(e nomadsim.Event) {
	name := r.hostOf(e)
	if name == "" {
		return
	}
	h := r.host(name)
	if e.NodeID != "" {
		h.hasNode = true
	}
	r.apply(name, h, e)
	if h.inCycle && h.backInService() {
		h.inCycle = false
	}
	r.checkGroup(name, e.Seq)
}

// hostOf is the host an event concerns: the one it names, or the one last
// named with its node ID ("" when neither is known).
func (r *replay) hostOf(e nomadsim.Event) string {
	name := e.Host
	if name == "" && e.NodeID != "" {
		name = r.byNode[e.NodeID]
	}
	if name != "" && e.NodeID != "" {
		r.byNode[e.NodeID] = name
	}
	return name
}

// host is name's state, up, ready and as eligible as it was before the
// rollout when first seen (eligible when Spec.EligibleBefore does not say).
func (r *replay) host(name string) *hostState {
	h := r.hosts[name]
	if h == nil {
		elig, known := r.spec.EligibleBefore[name]
		h = &hostState{up: true, ready: true, eligible: elig || !known, eligibleStart: elig || !known}
		r.hosts[name] = h
	}
	return h
}

// apply moves h through one event.
func (r *replay) apply(name string, h *hostState, e nomadsim.Event) {
	switch e.Type {
	case nomadsim.EventDrainStart:
		// A drain someone else started (its meta names no grant of
		// rollboot's: an operator's) takes the node out, but not for a
		// reboot cycle: it does not count against the group's concurrency.
		// Over a cycle of rollboot's, it takes the node back from it (the
		// coordinator ends that attempt and frees its slot), unless the
		// host is down rebooting already.
		rollboots := e.Details[DrainGrantDetail] != ""
		h.draining, h.drainDone, h.drainForced, h.eligible = true, false, false, false
		h.cordoned = false // rollboot's cordon becomes part of its drain; someone else's drain takes the node over
		h.inCycle = rollboots || h.inCycle && !h.up
	case nomadsim.EventDrainUpdate:
		// A drain updated with someone else's meta is theirs from now on.
		if foreignMeta(e.Details) && h.up {
			h.inCycle = false
		}
	case nomadsim.EventDrainCancel:
		h.draining = false
		if e.Details["mark_eligible"] == "true" {
			h.eligible = true
		}
	case nomadsim.EventDrainComplete:
		h.draining, h.drainDone, h.awaitReboot = false, true, true
		h.drainForced = e.Details["deadline_reached"] == "true"
	case nomadsim.EventEligibility:
		h.eligible = e.Details["eligibility"] == "eligible"
		h.cordoned = !h.eligible && !h.draining && !h.inCycle && !h.awaitReboot && h.up
		if h.eligible && !h.draining {
			// Back in service without a reboot (a failed attempt given back,
			// or an operator's doing): no longer out for a reboot.
			h.awaitReboot = false
		}
		if h.eligible && !h.eligibleStart {
			r.out = append(r.out, Violation{3, name, e.Seq, "rollboot made eligible a node that was ineligible before it touched it"})
		}
	case nomadsim.EventNodeDown, nomadsim.EventNodeDisconnected, nomadsim.EventNodeInit:
		h.ready = false
	case nomadsim.EventNodeReady:
		h.ready = true
	case nomadsim.EventHostRebootStart:
		r.rebootStart(name, h, e)
	case nomadsim.EventHostBoot:
		h.up, h.drainDone, h.drainForced, h.awaitReboot = true, false, false, false
	}
}

// rebootStart takes h down for a reboot, checking invariant 2 for its servers
// and invariant 4 for its node.
func (r *replay) rebootStart(name string, h *hostState, e nomadsim.Event) {
	h.reboots++
	// Invariant 2: a server host goes down only while each of its
	// clusters is healthy and can lose a server.
	for _, product := range []string{"nomad", "consul", "vault"} {
		if e.Details[product+"_server"] != "true" {
			continue
		}
		ft, _ := strconv.Atoi(e.Details[product+"_failure_tolerance"])
		if e.Details[product+"_healthy"] != "true" || ft < 1 {
			r.out = append(r.out, Violation{2, name, e.Seq, fmt.Sprintf(
				"rebooted a %s server while its cluster was healthy=%s with failure tolerance %d",
				product, e.Details[product+"_healthy"], ft)})
		}
	}
	h.up, h.inCycle = false, true
	if !h.hasNode {
		return
	}
	if msg := h.notReadyToReboot(r.spec.Force); msg != "" {
		r.out = append(r.out, Violation{4, name, e.Seq, msg})
	}
}

// notReadyToReboot says why a host with a node must not reboot now
// (invariant 4), "" when it may: its drain completed, and its node was not
// given back since. force: the policy allows a drain forced at its deadline.
func (h *hostState) notReadyToReboot(force bool) string {
	switch {
	case h.draining:
		return "rebooted while its drain was still running"
	case !h.drainDone:
		return "rebooted without a completed drain"
	case h.eligible:
		// Made eligible after its drain: the node is back in the
		// scheduler's hands and Nomad may have placed work on it.
		return "rebooted while its node was eligible again after the drain"
	case h.drainForced && !force:
		return "rebooted after a drain forced at its deadline, but the policy is abort"
	}
	return ""
}

// backInService reports whether a host is back in service: it is up, its
// node ready and not draining, not waiting for its reboot, and eligible if it
// was before.
func (h *hostState) backInService() bool {
	return h.up && (!h.hasNode || (h.ready && !h.draining && !h.awaitReboot && (h.eligible || !h.eligibleStart)))
}

// checkGroup checks invariant 1 for the group of host name after the event
// seq: never more of its hosts out of service than allowed. It is reported
// once each time the group goes over its limit.
func (r *replay) checkGroup(name string, seq int) {
	g, ok := r.spec.Group[name]
	if !ok {
		return
	}
	n := 0
	for other, st := range r.hosts {
		if st.inCycle && r.spec.Group[other] == g {
			n++
		}
	}
	if n > r.peak[g] {
		r.peak[g] = n
	}
	limit, ok := r.spec.Concurrency[g]
	if ok && n > limit && !r.over[g] {
		r.out = append(r.out, Violation{1, name, seq, fmt.Sprintf("%d hosts of group %s out of service at once; concurrency is %d", n, g, limit)})
	}
	r.over[g] = ok && n > limit
}

// checkFinal checks invariant 3 at the end: no node left draining, every
// node as eligible as it was before (eligibleBefore) the rollout, and none
// left cordoned (made ineligible with no drain, neither drained nor given
// back since), whether or not the test knows its eligibility before.
func checkFinal(final map[string]Final, eligibleBefore map[string]bool, cordoned map[string]bool) []Violation {
	var out []Violation
	names := make([]string, 0, len(final))
	for n := range final {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		f := final[name]
		if !f.HasNode {
			continue
		}
		before, known := eligibleBefore[name]
		if f.Draining {
			out = append(out, Violation{3, name, 0, "node left draining"})
		}
		if cordoned[name] && !f.Eligible && !f.Draining {
			out = append(out, Violation{3, name, 0, "node made ineligible with no drain (a cordon) and neither drained nor given back"})
			continue
		}
		if known && before && !f.Eligible {
			out = append(out, Violation{3, name, 0, "node left ineligible though it was eligible before"})
		}
		if known && !before && f.Eligible {
			out = append(out, Violation{3, name, 0, "node made eligible though it was ineligible before"})
		}
	}
	return out
}

// checkReboots checks invariant 5: each host rebooted as many times as it
// must (want), in host order.
func checkReboots(got, want map[string]int) []Violation {
	var out []Violation
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if got[name] != want[name] {
			out = append(out, Violation{5, name, 0, fmt.Sprintf("rebooted %d times, want %d", got[name], want[name])})
		}
	}
	return out
}

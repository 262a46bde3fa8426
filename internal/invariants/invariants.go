// Package invariants checks rollboot's safety invariants (DESIGN.md) independently of
// the code under test: it reads only the emulator's event log and final state, what
// an outside observer of the Nomad cluster would see, never rollboot's own records.
package invariants

import (
	"fmt"
	"sort"
	"strconv"

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
	var out []Violation
	hosts := map[string]*hostState{}
	byNode := map[string]string{}
	get := func(name string) *hostState {
		h := hosts[name]
		if h == nil {
			elig, known := spec.EligibleBefore[name]
			h = &hostState{up: true, ready: true, eligible: elig || !known, eligibleStart: elig || !known}
			hosts[name] = h
		}
		return h
	}
	peak := map[string]int{}
	over := map[string]bool{}
	for _, e := range events {
		name := e.Host
		if name == "" && e.NodeID != "" {
			name = byNode[e.NodeID]
		}
		if name == "" {
			continue
		}
		if e.NodeID != "" {
			byNode[e.NodeID] = name
		}
		h := get(name)
		if e.NodeID != "" {
			h.hasNode = true
		}
		switch e.Type {
		case nomadsim.EventDrainStart:
			h.draining, h.drainDone, h.drainForced, h.eligible, h.inCycle = true, false, false, false, true
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
			if h.eligible && !h.draining {
				// Back in service without a reboot (a failed attempt given back,
				// or an operator's doing): no longer out for a reboot.
				h.awaitReboot = false
			}
			if h.eligible && !h.eligibleStart {
				out = append(out, Violation{3, name, e.Seq, "rollboot made eligible a node that was ineligible before it touched it"})
			}
		case nomadsim.EventNodeDown, nomadsim.EventNodeDisconnected, nomadsim.EventNodeInit:
			h.ready = false
		case nomadsim.EventNodeReady:
			h.ready = true
		case nomadsim.EventHostRebootStart:
			h.reboots++
			// Invariant 2: a server host goes down only while each of its
			// clusters is healthy and can lose a server.
			for _, product := range []string{"nomad", "consul", "vault"} {
				if e.Details[product+"_server"] != "true" {
					continue
				}
				ft, _ := strconv.Atoi(e.Details[product+"_failure_tolerance"])
				if e.Details[product+"_healthy"] != "true" || ft < 1 {
					out = append(out, Violation{2, name, e.Seq, fmt.Sprintf(
						"rebooted a %s server while its cluster was healthy=%s with failure tolerance %d",
						product, e.Details[product+"_healthy"], ft)})
				}
			}
			h.up, h.inCycle = false, true
			if h.hasNode {
				switch {
				case h.draining:
					out = append(out, Violation{4, name, e.Seq, "rebooted while its drain was still running"})
				case !h.drainDone:
					out = append(out, Violation{4, name, e.Seq, "rebooted without a completed drain"})
				case h.eligible:
					// Made eligible after its drain: the node is back in the
					// scheduler's hands and Nomad may have placed work on it.
					out = append(out, Violation{4, name, e.Seq, "rebooted while its node was eligible again after the drain"})
				case h.drainForced && !spec.Force:
					out = append(out, Violation{4, name, e.Seq, "rebooted after a drain forced at its deadline, but the policy is abort"})
				}
			}
		case nomadsim.EventHostBoot:
			h.up, h.drainDone, h.drainForced, h.awaitReboot = true, false, false, false
		}
		// A host is back in service once it is up, its node ready and not
		// draining, not waiting for its reboot, and eligible if it was before.
		if h.inCycle && h.up && (!h.hasNode || (h.ready && !h.draining && !h.awaitReboot && (h.eligible || !h.eligibleStart))) {
			h.inCycle = false
		}
		// Invariant 1: per group, never more hosts out of service than allowed.
		if g, ok := spec.Group[name]; ok {
			n := 0
			for other, st := range hosts {
				if st.inCycle && spec.Group[other] == g {
					n++
				}
			}
			if n > peak[g] {
				peak[g] = n
			}
			// Reported once each time the group goes over its limit.
			limit, ok := spec.Concurrency[g]
			if ok && n > limit && !over[g] {
				out = append(out, Violation{1, name, e.Seq, fmt.Sprintf("%d hosts of group %s out of service at once; concurrency is %d", n, g, limit)})
			}
			over[g] = ok && n > limit
		}
	}
	// Invariant 3 at the end: no node left ineligible or draining by rollboot.
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
		before, known := spec.EligibleBefore[name]
		if f.Draining {
			out = append(out, Violation{3, name, 0, "node left draining"})
		}
		if known && before && !f.Eligible {
			out = append(out, Violation{3, name, 0, "node left ineligible though it was eligible before"})
		}
		if known && !before && f.Eligible {
			out = append(out, Violation{3, name, 0, "node made eligible though it was ineligible before"})
		}
	}
	// Invariant 5: each request rebooted exactly once.
	reboots := map[string]int{}
	for name, h := range hosts {
		reboots[name] = h.reboots
	}
	wantNames := make([]string, 0, len(spec.Reboots))
	for n := range spec.Reboots {
		wantNames = append(wantNames, n)
	}
	sort.Strings(wantNames)
	for _, name := range wantNames {
		if got, want := reboots[name], spec.Reboots[name]; got != want {
			out = append(out, Violation{5, name, 0, fmt.Sprintf("rebooted %d times, want %d", got, want)})
		}
	}
	var migratePeak map[string]int
	if spec.Jobs != nil {
		var mv []Violation
		mv, migratePeak = checkMigrations(events, spec.Jobs)
		out = append(out, mv...)
	}
	return Result{Violations: out, Peak: peak, Reboots: reboots, MigratePeak: migratePeak}
}

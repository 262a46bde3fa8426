package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The failure budget: a scope (a group, or the whole rollout) whose cycles
// fail too often within a time window halts itself. No new drain starts there
// until an operator resumes it (`rollboot resume`); the hosts already out
// finish their cycle. The failures are the coordinator's own verdicts on its
// cycles (package phase, Decision.Failure), never a host's claim.

// FailureKind is how a cycle failed.
type FailureKind string

// The kinds of failure a budget may count.
const (
	// FailStuck: the host did not come back within rejoin_timeout after its
	// reboot (or its agent never started it): it turned stuck.
	FailStuck FailureKind = "stuck"
	// FailRebootFailed: the host did not reboot: its agent reported a failed
	// pre-reboot hook or reboot command, or it never went down; the drain was
	// undone and the host backs off.
	FailRebootFailed FailureKind = "reboot_failed"
	// FailUnhealthy: the host came back, but its workloads were still unhealthy
	// at the healthy deadline and its slot was freed (healthy.on_deadline =
	// "release").
	FailUnhealthy FailureKind = "unhealthy"
	// FailDrainAborted: the drain did not finish within its deadline and was
	// aborted (drain.on_timeout = "abort").
	FailDrainAborted FailureKind = "drain_aborted"
)

// FailureKinds are the kinds, in the order the docs list them.
var FailureKinds = []FailureKind{FailStuck, FailRebootFailed, FailUnhealthy, FailDrainAborted}

// ParseFailureKind parses a kind of failure as a failure budget's count names it.
func ParseFailureKind(s string) (FailureKind, error) {
	for _, k := range FailureKinds {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(FailureKinds))
	for i, k := range FailureKinds {
		names[i] = fmt.Sprintf("%q", k)
	}
	return "", fmt.Errorf("unknown failure %q: use %s", s, strings.Join(names, ", "))
}

// RolloutScope is the scope of the rollout-wide failure budget; any other
// scope is a group's name.
const RolloutScope = ""

// ScopeName is how a scope is named to an operator.
func ScopeName(scope string) string {
	if scope == RolloutScope {
		return "the rollout"
	}
	return fmt.Sprintf("group %q", scope)
}

// FailureBudget is a scope's failure budget: MaxFailures failed cycles of the
// kinds counted within Window halt the scope. MaxFailures 0: no budget.
type FailureBudget struct {
	MaxFailures int
	Window      time.Duration
	Count       []FailureKind
}

// On reports whether the budget is set.
func (b FailureBudget) On() bool { return b.MaxFailures > 0 }

// counts reports whether the budget counts failures of kind k.
func (b FailureBudget) counts(k FailureKind) bool { return slices.Contains(b.Count, k) }

// FailureBudgets are the budgets of the rollout and of each group that has one.
type FailureBudgets struct {
	Rollout FailureBudget
	Groups  map[string]FailureBudget
}

// On reports whether any budget is set.
func (bs FailureBudgets) On() bool {
	if bs.Rollout.On() {
		return true
	}
	for _, b := range bs.Groups {
		if b.On() {
			return true
		}
	}
	return false
}

// Of returns the budget of scope (RolloutScope or a group).
func (bs FailureBudgets) Of(scope string) FailureBudget {
	if scope == RolloutScope {
		return bs.Rollout
	}
	return bs.Groups[scope]
}

// longest is the longest window of the budgets set: how long a failure is
// worth keeping.
func (bs FailureBudgets) longest() time.Duration {
	var d time.Duration
	for _, s := range bs.scopes() {
		d = max(d, bs.Of(s).Window)
	}
	return d
}

// scopes are the scopes with a budget, the rollout first, then the groups by
// name.
func (bs FailureBudgets) scopes() []string {
	var out []string
	if bs.Rollout.On() {
		out = append(out, RolloutScope)
	}
	var groups []string
	for g, b := range bs.Groups {
		if b.On() {
			groups = append(groups, g)
		}
	}
	sort.Strings(groups)
	return append(out, groups...)
}

// Failure is one failed cycle as the coordinator decided it.
type Failure struct {
	Host   string      `json:"host"`
	Group  string      `json:"group"`
	Grant  string      `json:"grant"`
	Kind   FailureKind `json:"kind"`
	At     time.Time   `json:"at"`
	Detail string      `json:"detail,omitempty"`
}

// Same reports whether f and o are the same failure (one cycle fails one way
// once, however often its decision is made again).
func (f Failure) Same(o Failure) bool {
	return f.Host == o.Host && f.Grant == o.Grant && f.Kind == o.Kind
}

// String is the failure as a halt's reason lists it: "web-3 stuck".
func (f Failure) String() string { return f.Host + " " + string(f.Kind) }

// Halt is a scope halted by its failure budget.
type Halt struct {
	Scope    string    `json:"scope"`
	Since    time.Time `json:"since"`
	Failures []Failure `json:"failures"`
	// Reason: a halt not made by the budget (a canary that failed, say).
	Reason string `json:"reason,omitempty"`
}

// Text is why the scope is halted, for the hosts it holds and the banner.
func (h Halt) Text() string {
	why := h.Reason
	if len(h.Failures) > 0 {
		names := make([]string, len(h.Failures))
		for i, f := range h.Failures {
			names[i] = f.String()
		}
		cycles := "cycles"
		if len(h.Failures) == 1 {
			cycles = "cycle"
		}
		fails := fmt.Sprintf("%d failed %s (%s)", len(h.Failures), cycles, strings.Join(names, ", "))
		if why == "" {
			why = fails
		} else {
			why += "; " + fails
		}
	}
	cmd := "rollboot resume"
	if h.Scope != RolloutScope {
		cmd += " -group " + h.Scope
	}
	return fmt.Sprintf("%s halted at %s: %s; %s lifts it", ScopeName(h.Scope), h.Since.UTC().Format(time.RFC3339), why, cmd)
}

// Resume is an operator's resume of a halted scope.
type Resume struct {
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// HaltState is what the failure budgets decide on and keep: the failures
// recorded, the scopes halted, and the last resume of each scope.
type HaltState struct {
	Failures []Failure
	Halts    map[string]Halt
	Resumes  map[string]Resume
	// Log: the last halts and resumes, oldest first (at most MaxLogKept).
	Log []HaltEvent
}

// HaltEvent is a halt or a resume, as the halt state's log keeps it.
type HaltEvent struct {
	At     time.Time `json:"at"`
	Scope  string    `json:"scope"`
	Event  string    `json:"event"` // "halted" or "resumed"
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// MaxLogKept bounds the halt state's log.
const MaxLogKept = 20

// logged returns log with e added, the oldest dropped past MaxLogKept.
func logged(log []HaltEvent, e HaltEvent) []HaltEvent {
	out := append(slices.Clone(log), e)
	if n := len(out) - MaxLogKept; n > 0 {
		out = out[n:]
	}
	return out
}

// MaxFailuresKept bounds the failures a state keeps (the newest stay): the
// state is one Nomad variable.
const MaxFailuresKept = 100

// Record returns st with the failures fs added (those it holds already are
// not added again), the failures no budget counts any more dropped (older than
// the longest window, or before their scopes' resumes), and the scopes whose
// budget fs exhausted halted. It reports whether st changed.
func Record(bs FailureBudgets, st HaltState, fs []Failure, now time.Time) (HaltState, bool) {
	out := HaltState{Halts: clone(st.Halts), Resumes: clone(st.Resumes), Log: st.Log}
	changed := false
	keep := func(f Failure) bool {
		return now.Sub(f.At) < bs.longest() && (counted(bs, RolloutScope, f, st.Resumes) || counted(bs, f.Group, f, st.Resumes))
	}
	for _, f := range st.Failures {
		if keep(f) {
			out.Failures = append(out.Failures, f)
		} else {
			changed = true
		}
	}
	for _, f := range fs {
		if slices.ContainsFunc(out.Failures, f.Same) || !keep(f) {
			continue
		}
		out.Failures = append(out.Failures, f)
		changed = true
	}
	if n := len(out.Failures) - MaxFailuresKept; n > 0 {
		out.Failures = out.Failures[n:]
	}
	for _, h := range Exhausted(bs, out, now) {
		out.Halts[h.Scope] = h
		out.Log = logged(out.Log, HaltEvent{At: now, Scope: h.Scope, Event: "halted", Reason: h.Text()})
		changed = true
	}
	return out, changed
}

// counted reports whether scope's budget counts f: set, of a kind it counts,
// of its group (any group for the rollout), after the scope's last resume.
func counted(bs FailureBudgets, scope string, f Failure, resumes map[string]Resume) bool {
	b := bs.Of(scope)
	if !b.On() || !b.counts(f.Kind) || (scope != RolloutScope && f.Group != scope) {
		return false
	}
	r, ok := resumes[scope]
	return !ok || f.At.After(r.At)
}

// Exhausted returns the scopes not halted yet whose budget the failures in st
// exhaust at now: at least MaxFailures failures it counts within its window
// (now - At < Window), after its last resume.
func Exhausted(bs FailureBudgets, st HaltState, now time.Time) []Halt {
	var out []Halt
	for _, scope := range bs.scopes() {
		if _, halted := st.Halts[scope]; halted {
			continue
		}
		b := bs.Of(scope)
		var fs []Failure
		for _, f := range st.Failures {
			if counted(bs, scope, f, st.Resumes) && now.Sub(f.At) < b.Window {
				fs = append(fs, f)
			}
		}
		if len(fs) >= b.MaxFailures {
			out = append(out, Halt{Scope: scope, Since: now, Failures: fs})
		}
	}
	return out
}

// HaltOf returns the halt that holds the drains of group: the rollout's, else
// the group's; ok is false when neither is halted. A halt holds until it is
// resumed (Lift), whatever the policy says since: only an operator lifts it.
func HaltOf(halts map[string]Halt, group string) (Halt, bool) {
	for _, scope := range []string{RolloutScope, group} {
		if h, ok := halts[scope]; ok {
			return h, true
		}
	}
	return Halt{}, false
}

// HaltGroup returns st with group halted for reason (a canary's failure, say),
// naming the hosts whose cycles made it; a group already halted stays as it
// is. It reports whether st changed.
func HaltGroup(st HaltState, group, reason string, failures []Failure, now time.Time) (HaltState, bool) {
	if _, ok := st.Halts[group]; ok {
		return st, false
	}
	out := st
	out.Halts = clone(st.Halts)
	h := Halt{Scope: group, Since: now, Reason: reason, Failures: failures}
	out.Halts[group] = h
	out.Log = logged(st.Log, HaltEvent{At: now, Scope: group, Event: "halted", Reason: h.Text()})
	return out, true
}

// Lift returns st with scope's halt lifted by an operator at now: the failures
// before it no longer count. It reports whether the scope was halted.
func Lift(st HaltState, scope string, r Resume) (HaltState, bool) {
	out := HaltState{Failures: st.Failures, Halts: clone(st.Halts), Resumes: clone(st.Resumes), Log: st.Log}
	_, halted := out.Halts[scope]
	delete(out.Halts, scope)
	out.Resumes[scope] = r
	if halted {
		out.Log = logged(st.Log, HaltEvent{At: r.At, Scope: scope, Event: "resumed", By: r.By})
	}
	return out, halted
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

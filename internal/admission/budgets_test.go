package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// The failure budgets' halts and the rollout budget: a halted scope starts no
// drain and says why; an unreadable halt state holds the scopes with a budget;
// max_out and max_drains_per_hour cap all groups together, first come first
// served, on top of each group's slots.
func TestAdmitBudgets(t *testing.T) {
	web := func(p Pending) Pending { p.Group = "web"; return p }
	two := func(queue ...Pending) Input {
		in := input(5, queue...)
		in.Rules.Groups = append(in.Rules.Groups, policy.Group{Name: "web", Concurrency: 5})
		in.Groups["web"] = GroupCount{Size: 10}
		return in
	}
	halt := policy.Halt{Scope: "web", Since: now, Failures: []policy.Failure{{Host: "w1", Kind: policy.FailStuck}, {Host: "w2", Kind: policy.FailRebootFailed}}}
	tests := []struct {
		name     string
		in       Input
		admitted []string
		wait     map[string]phase.WaitKind
		detail   map[string]string // a part of the reason
		recheck  time.Time
	}{
		{name: "a halted group holds its hosts, another group goes on",
			in: func() Input {
				in := two(web(pending("a", 0)), pending("b", time.Minute))
				in.Halts = map[string]policy.Halt{"web": halt}
				return in
			}(),
			admitted: []string{"b"}, wait: map[string]phase.WaitKind{"a": phase.WaitHalted},
			detail: map[string]string{"a": "w1 stuck, w2 reboot_failed); rollboot resume -group web lifts it"}},
		{name: "the rollout halted holds every group",
			in: func() Input {
				in := two(web(pending("a", 0)), pending("b", time.Minute))
				in.Halts = map[string]policy.Halt{policy.RolloutScope: {Since: now}}
				return in
			}(),
			wait: map[string]phase.WaitKind{"a": phase.WaitHalted, "b": phase.WaitHalted}},
		{name: "halt state unreadable: every group holds (any may be halted)",
			in: func() Input {
				in := two(web(pending("a", 0)), pending("b", time.Minute))
				in.HaltsUnknown = "read rollboot/halts: 500"
				return in
			}(),
			wait:   map[string]phase.WaitKind{"a": phase.WaitHaltUnknown, "b": phase.WaitHaltUnknown},
			detail: map[string]string{"a": "read rollboot/halts: 500"}},
		{name: "max_out across groups: first come, first served",
			in: func() Input {
				in := two(web(pending("a", 0)), pending("b", time.Minute), web(pending("c", 2*time.Minute)))
				in.Rules.Rollout = policy.RolloutBudget{MaxOut: 3}
				in.Groups["web"] = GroupCount{Size: 10, Active: 1}
				return in
			}(),
			admitted: []string{"a", "b"}, wait: map[string]phase.WaitKind{"c": phase.WaitRolloutBudget},
			detail: map[string]string{"c": "rollout max_out: 3 of 3 hosts out"}},
		{name: "max_drains_per_hour: held until the oldest drain is an hour old",
			in: func() Input {
				in := two(web(pending("a", 0)), pending("b", time.Minute))
				in.Rules.Rollout = policy.RolloutBudget{MaxDrainsPerHour: 2}
				in.DrainStarts = []time.Time{now.Add(-50 * time.Minute), now.Add(-2 * time.Hour)}
				return in
			}(),
			admitted: []string{"a"}, wait: map[string]phase.WaitKind{"b": phase.WaitRolloutBudget},
			detail:  map[string]string{"b": "max_drains_per_hour: 2 drains started in the last hour, of 2; the next may start at 2026-12-02T10:10:00Z"},
			recheck: now.Add(10 * time.Minute)},
		{name: "the group's own slots still count under the rollout budget",
			in: func() Input {
				in := two(web(pending("a", 0)), web(pending("b", time.Minute)))
				in.Rules.Groups[1].Concurrency = 1
				in.Rules.Rollout = policy.RolloutBudget{MaxOut: 10}
				return in
			}(),
			admitted: []string{"a"}, wait: map[string]phase.WaitKind{"b": phase.WaitQueued}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, needs := Admit(tt.in)
			if !needs.None() {
				t.Fatalf("needs %+v", needs)
			}
			for _, h := range tt.admitted {
				if !res.Admitted[h] {
					t.Errorf("%s not admitted: %v", h, res.Wait[h])
				}
			}
			if len(res.Admitted) != len(tt.admitted) {
				t.Errorf("admitted %v, want %v", res.Admitted, tt.admitted)
			}
			for h, k := range tt.wait {
				if res.Wait[h].Kind != k {
					t.Errorf("%s waits for %q (%s), want %s", h, res.Wait[h], res.Wait[h].Kind.Name(), k.Name())
				}
				if d := tt.detail[h]; !strings.Contains(res.Wait[h].String(), d) {
					t.Errorf("%s waits for %q, want it to say %q", h, res.Wait[h], d)
				}
			}
			if !tt.recheck.IsZero() && !res.RecheckAt.Equal(tt.recheck) {
				t.Errorf("recheck at %v, want %v", res.RecheckAt, tt.recheck)
			}
		})
	}
}

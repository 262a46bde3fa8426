package policy

import (
	"strings"
	"testing"
	"time"
)

func TestRecordHalts(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	all := FailureKinds
	web := FailureBudget{MaxFailures: 2, Window: time.Hour, Count: all}
	fail := func(host, group string, k FailureKind, at time.Duration) Failure {
		return Failure{Host: host, Group: group, Grant: "g-" + host, Kind: k, At: t0.Add(at)}
	}
	tests := []struct {
		name    string
		budgets FailureBudgets
		st      HaltState
		add     []Failure
		now     time.Duration
		halted  []string // scopes halted after
		kept    int      // failures kept
	}{
		{name: "no budget: nothing kept, nothing halts",
			add: []Failure{fail("a", "web", FailStuck, 0), fail("b", "web", FailStuck, 0)}},
		{name: "one failure under a budget of two",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			add:     []Failure{fail("a", "web", FailStuck, 0)}, kept: 1},
		{name: "the second failure halts the group",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("b", "web", FailRebootFailed, time.Minute)}, now: time.Minute,
			halted: []string{"web"}, kept: 2},
		{name: "the same failure decided again counts once",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("a", "web", FailStuck, time.Minute)}, now: time.Minute, kept: 1},
		{name: "another group's failures do not count",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("b", "db", FailStuck, time.Minute)}, now: time.Minute, kept: 1},
		{name: "a failure out of the window does not count, and is dropped",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("b", "web", FailStuck, time.Hour)}, now: time.Hour, kept: 1},
		{name: "a kind not counted does not count",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": {MaxFailures: 2, Window: time.Hour, Count: []FailureKind{FailStuck}}}},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("b", "web", FailDrainAborted, time.Minute)}, now: time.Minute, kept: 1},
		{name: "failures before a resume do not count",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st: HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)},
				Resumes: map[string]Resume{"web": {At: t0.Add(30 * time.Second)}}},
			add: []Failure{fail("b", "web", FailStuck, time.Minute)}, now: time.Minute, kept: 1},
		{name: "the rollout budget counts every group",
			budgets: FailureBudgets{Rollout: web},
			st:      HaltState{Failures: []Failure{fail("a", "web", FailStuck, 0)}},
			add:     []Failure{fail("b", "db", FailUnhealthy, time.Minute)}, now: time.Minute,
			halted: []string{RolloutScope}, kept: 2},
		{name: "a halted scope stays halted with its failures gone",
			budgets: FailureBudgets{Groups: map[string]FailureBudget{"web": web}},
			st:      HaltState{Halts: map[string]Halt{"web": {Scope: "web", Since: t0}}},
			now:     48 * time.Hour, halted: []string{"web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := Record(tt.budgets, tt.st, tt.add, t0.Add(tt.now))
			var halted []string
			for _, s := range []string{RolloutScope, "web", "db"} {
				if _, ok := st.Halts[s]; ok {
					halted = append(halted, s)
				}
			}
			if strings.Join(halted, ",") != strings.Join(tt.halted, ",") {
				t.Errorf("halted %q, want %q", halted, tt.halted)
			}
			if len(st.Failures) != tt.kept {
				t.Errorf("kept %d failures, want %d: %v", len(st.Failures), tt.kept, st.Failures)
			}
		})
	}
}

func TestHaltOfAndLift(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	bs := FailureBudgets{Rollout: FailureBudget{MaxFailures: 3, Window: time.Hour, Count: FailureKinds},
		Groups: map[string]FailureBudget{"web": {MaxFailures: 2, Window: time.Hour, Count: FailureKinds}}}
	halts := map[string]Halt{"web": {Scope: "web", Since: t0, Failures: []Failure{{Host: "a", Kind: FailStuck}, {Host: "b", Kind: FailRebootFailed}}}}
	tests := []struct {
		name   string
		bs     FailureBudgets
		halts  map[string]Halt
		group  string
		halted bool
		text   string
	}{
		{name: "the group halted", bs: bs, halts: halts, group: "web", halted: true,
			text: `group "web" halted at 2026-12-06T10:00:00Z: 2 failed cycles (a stuck, b reboot_failed); rollboot resume -group web lifts it`},
		{name: "another group goes on", bs: bs, halts: halts, group: "db"},
		{name: "the rollout halted holds every group", bs: bs, halts: map[string]Halt{RolloutScope: {Since: t0, Failures: []Failure{{Host: "c", Kind: FailUnhealthy}}}},
			group: "db", halted: true, text: `the rollout halted at 2026-12-06T10:00:00Z: 1 failed cycle (c unhealthy); rollboot resume lifts it`},
		{name: "a halt holds with its budget removed from the policy: only a resume lifts it", halts: halts, group: "web", halted: true,
			text: `group "web" halted at 2026-12-06T10:00:00Z: 2 failed cycles (a stuck, b reboot_failed); rollboot resume -group web lifts it`},
		{name: "a halt with a reason of its own", halts: map[string]Halt{"web": {Scope: "web", Since: t0, Reason: "canary web-1 failed"}},
			group: "web", halted: true, text: `group "web" halted at 2026-12-06T10:00:00Z: canary web-1 failed; rollboot resume -group web lifts it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := HaltOf(tt.halts, tt.group)
			if ok != tt.halted || (ok && h.Text() != tt.text) {
				t.Errorf("HaltOf = %q, %v; want %q, %v", h.Text(), ok, tt.text, tt.halted)
			}
		})
	}
	st, was := Lift(HaltState{Halts: halts}, "web", Resume{At: t0.Add(time.Minute), By: "ops"})
	if !was || len(st.Halts) != 0 || st.Resumes["web"].By != "ops" || len(halts) != 1 {
		t.Errorf("Lift = %+v, %v; the input must stay as it was: %v", st, was, halts)
	}
	if _, was := Lift(st, "db", Resume{At: t0}); was {
		t.Error("Lift of a group not halted says it was")
	}
	st2, changed := HaltGroup(st, "web", "canary web-1 failed", nil, t0)
	if !changed || st2.Halts["web"].Reason == "" || len(st.Halts) != 0 {
		t.Errorf("HaltGroup = %+v, %v", st2, changed)
	}
	if _, changed := HaltGroup(st2, "web", "again", nil, t0); changed {
		t.Error("HaltGroup of a halted group changed it")
	}
}

func TestParseFailureKind(t *testing.T) {
	for _, k := range FailureKinds {
		if got, err := ParseFailureKind(string(k)); got != k || err != nil {
			t.Errorf("ParseFailureKind(%q) = %q, %v", k, got, err)
		}
	}
	if _, err := ParseFailureKind("crashed"); err == nil || !strings.Contains(err.Error(), `"stuck"`) {
		t.Errorf("ParseFailureKind(crashed) = %v, want an error listing the kinds", err)
	}
}

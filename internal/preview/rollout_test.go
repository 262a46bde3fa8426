package preview

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// The rollout budget across groups: plan serves every group's queue under
// max_out and max_drains_per_hour, so its estimates follow them; a halted
// group's hosts have no estimate, and the plan says it will not finish.
func TestBuildRolloutBudgets(t *testing.T) {
	always := policy.Schedule(nil)
	two := []ObservedGroup{group("web", 2, 4, always), group("db", 2, 4, always)}
	hosts := []ObservedHost{pending("a", "web", -4*m), pending("b", "db", -3*m), pending("c", "web", -2*m), pending("d", "db", -1*m)}
	tests := []struct {
		name    string
		rollout policy.RolloutBudget
		starts  []time.Time
		hosts   []ObservedHost
		want    string
	}{
		{name: "no cap: each group two at a time", hosts: hosts, want: "a 0/6, c 0/6, b 0/6, d 0/6"},
		{name: "max_out 2 across groups: first come first served", rollout: policy.RolloutBudget{MaxOut: 2}, hosts: hosts,
			want: "a 0/6, c 6/12, b 0/6, d 6/12"},
		{name: "max_out 2 with one host out already", rollout: policy.RolloutBudget{MaxOut: 2},
			hosts: append([]ObservedHost{active("x", "web", store.PhaseDraining, -m)}, hosts...),
			want:  "x -1/5, a 0/6, c 6/12, b 5/11, d 11/17"},
		{name: "two drains an hour: the third an hour after the first", rollout: policy.RolloutBudget{MaxDrainsPerHour: 2}, hosts: hosts,
			want: "a 0/6, c 60/66, b 0/6, d 60/66"},
		{name: "the last hour's drains count", rollout: policy.RolloutBudget{MaxDrainsPerHour: 2}, starts: []time.Time{at(-50 * m), at(-40 * m)},
			hosts: hosts, want: "a 10/16, c 70/76, b 20/26, d 80/86"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: two, Hosts: tt.hosts,
				Rollout: tt.rollout, DrainStarts: tt.starts}})
			if got := est(p); got != tt.want {
				t.Errorf("estimates %s\nwant      %s", got, tt.want)
			}
		})
	}
}

func TestBuildHalted(t *testing.T) {
	halted := pending("a", "web", -m)
	halted.Waiting = phase.WaitReason{Kind: phase.WaitHalted, Detail: `group "web" halted`}
	h := policy.Halt{Scope: "web", Since: now, Failures: []policy.Failure{{Host: "z", Kind: policy.FailStuck}}}
	p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: []ObservedGroup{group("web", 1, 2, nil)},
		Hosts: []ObservedHost{halted}, Halts: []policy.Halt{h}}})
	if p.Unestimated != 1 || !strings.HasPrefix(p.Groups[0].Hosts[0].NoEstimate, "halted") {
		t.Errorf("halted host estimated: %+v", p.Groups[0].Hosts[0])
	}
	var b strings.Builder
	writePlan(&b, p)
	for _, want := range []string{`HALTED: group "web" halted at`, "will not finish until `rollboot resume`"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

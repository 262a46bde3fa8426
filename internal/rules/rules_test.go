package rules

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/wave"
	"github.com/rollboot/rollboot/internal/workload"
)

func sample() Rules {
	return Rules{
		DefaultGroup:   policy.Group{Name: "default", Concurrency: 1},
		DefaultOptions: GroupOptions{Drain: phase.DrainOptions{Deadline: time.Hour}},
		Groups: []GroupSpec{
			{Group: policy.Group{Name: "web", Concurrency: 3}, Filter: `Meta.role == "web"`,
				Options: GroupOptions{Drain: phase.DrainOptions{Deadline: 20 * time.Minute},
					Healthy: rejoin.Settings{Deadline: time.Minute, OnDeadline: rejoin.OnDeadlineRelease},
					Wave:    wave.GroupRules{Canaries: 1}}},
			{Group: policy.Group{Name: "db", Concurrency: 1}, Options: GroupOptions{HoldSingletons: true}},
		},
	}
}

func TestGroupLookups(t *testing.T) {
	r := sample()
	for _, tc := range []struct {
		name            string
		known           bool
		deadline        time.Duration // healthy
		onDeadline      string
		drainDeadline   time.Duration
		holdsSingletons bool
	}{
		{name: "web", known: true, deadline: time.Minute, onDeadline: rejoin.OnDeadlineRelease, drainDeadline: 20 * time.Minute},
		// Healthy settings left zero are the safe defaults.
		{name: "db", known: true, deadline: 10 * time.Minute, onDeadline: rejoin.OnDeadlineHold, holdsSingletons: true},
		{name: "default", known: true, deadline: 10 * time.Minute, onDeadline: rejoin.OnDeadlineHold, drainDeadline: time.Hour},
		// An unknown group takes the default group's options.
		{name: "gone", deadline: 10 * time.Minute, onDeadline: rejoin.OnDeadlineHold, drainDeadline: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Known(tc.name); got != tc.known {
				t.Errorf("Known = %v, want %v", got, tc.known)
			}
			o := r.Options(tc.name)
			if o.Healthy.Deadline != tc.deadline || o.Healthy.OnDeadline != tc.onDeadline {
				t.Errorf("healthy = %+v, want deadline %s on_deadline %q", o.Healthy, tc.deadline, tc.onDeadline)
			}
			if o.Drain.Deadline != tc.drainDeadline || o.HoldSingletons != tc.holdsSingletons {
				t.Errorf("options = %+v", o)
			}
		})
	}
	dd := r.DrainDeadlines()
	if len(dd) != 2 || dd["web"] != 20*time.Minute || dd["default"] != time.Hour {
		t.Errorf("DrainDeadlines = %v, want web 20m and default 1h only", dd)
	}
	if w := r.Waves(); len(w) != 1 || w["web"].Canaries != 1 {
		t.Errorf("Waves = %v, want web's only", w)
	}
	gs := r.AllGroups()
	if len(gs) != 3 || gs[0].Name != "default" || gs[1].Name != "web" || gs[2].Name != "db" {
		t.Errorf("AllGroups = %v, want default first, then match order", gs)
	}
	if ng := r.NodeGroups(); len(ng) != 2 || ng[0].Filter != `Meta.role == "web"` {
		t.Errorf("NodeGroups = %+v", ng)
	}
}

func TestSetDefaults(t *testing.T) {
	var r Rules
	r.SetDefaults()
	if g := r.DefaultGroup; g.Name != policy.DefaultGroupName || g.Concurrency != 1 {
		t.Errorf("default group = %+v, want %q of concurrency 1", g, policy.DefaultGroupName)
	}
	r = sample()
	r.DefaultGroup.Name = "base"
	r.SetDefaults()
	if g := r.DefaultGroup; g.Name != "base" {
		t.Errorf("a named default group was replaced: %+v", g)
	}
}

// The workload blockers read only with an API to read them, and only when
// a block asks for them or a group holds its singletons.
func TestAdmissionWorkloads(t *testing.T) {
	none := sample()
	none.Groups = none.Groups[:1]
	blocked := none
	blocked.Workloads = workload.Settings{Deployments: true}
	for _, tc := range []struct {
		name string
		r    Rules
		api  bool
		want bool
	}{
		{"nothing asks", none, true, false},
		{"a group holds its singletons", sample(), true, true},
		{"a block asks", blocked, true, true},
		{"no API", sample(), false, false},
	} {
		if got := tc.r.Admission(true, tc.api, phase.WaitReason{}).Workloads; got != tc.want {
			t.Errorf("%s: Workloads = %v, want %v", tc.name, got, tc.want)
		}
	}
}

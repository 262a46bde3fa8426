package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// The healthy checks in the phase machine: a rejoining host whose node is back
// waits for its allocations (and checks) to be healthy; past the deadline it is
// stuck (hold) or done with an alert (release); a stuck host whose workloads
// turn healthy finishes its cycle.
func TestStepHealthyAfterReboot(t *testing.T) {
	yes, no := true, false
	hold := rejoin.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoin.OnDeadlineHold}
	release := rejoin.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoin.OnDeadlineRelease}
	unhealthy := &rejoin.Observed{Allocs: []rejoin.Alloc{{Name: "web.web[0]", JobType: "service",
		DesiredStatus: "run", ClientStatus: "running", Healthy: &no}}}
	healthy := &rejoin.Observed{Allocs: []rejoin.Alloc{{Name: "web.web[0]", JobType: "service",
		DesiredStatus: "run", ClientStatus: "running", Healthy: &yes}}}
	critical := &rejoin.Observed{Checks: []rejoin.Check{{Name: "http", ServiceName: "api", Status: "critical"}}}
	back := host("b2", false) // the agent reported its new boot ID
	late := func(p *store.Plan) { p.Timeline[store.PhaseRejoining] = t0.Add(-11 * time.Minute) }
	stuckLate := func(p *store.Plan) {
		late(p)
		p.LastError = "workloads not healthy within 10m0s of the reboot: web.web[0] unhealthy"
	}
	tests := []struct {
		name      string
		in        Input
		phase     string
		wait      WaitKind
		lastError string
		unhealthy string
	}{
		{name: "unhealthy allocation holds the slot",
			in:    Input{Plan: plan(store.PhaseRejoining, nil), Healthy: hold, Health: unhealthy},
			phase: store.PhaseRejoining, wait: WaitAllocsUnhealthy},
		{name: "healthy allocations: back in service",
			in:    Input{Plan: plan(store.PhaseRejoining, nil), Healthy: hold, Health: healthy},
			phase: store.PhaseIdle},
		{name: "failing Consul check holds the slot",
			in: Input{Plan: plan(store.PhaseRejoining, nil), Health: critical,
				Healthy: rejoin.Settings{Deadline: time.Hour, OnDeadline: "hold", ConsulChecks: true}},
			phase: store.PhaseRejoining, wait: WaitConsulChecks},
		{name: "past the deadline with hold: stuck",
			in:    Input{Plan: plan(store.PhaseRejoining, late), Healthy: hold, Health: unhealthy},
			phase: store.PhaseStuck, wait: NotWaiting,
			lastError: "workloads not healthy within 10m0s of the reboot: web.web[0] unhealthy"},
		{name: "past the deadline with release: the slot is freed, alerted",
			in:    Input{Plan: plan(store.PhaseRejoining, late), Healthy: release, Health: unhealthy},
			phase: store.PhaseIdle, unhealthy: "web.web[0] unhealthy"},
		{name: "stuck, still unhealthy: stays stuck",
			in:    Input{Plan: plan(store.PhaseStuck, stuckLate), Healthy: hold, Health: unhealthy},
			phase: store.PhaseStuck, wait: WaitStuck,
			lastError: "workloads not healthy within 10m0s of the reboot: web.web[0] unhealthy"},
		{name: "stuck, turned healthy: back in service",
			in:    Input{Plan: plan(store.PhaseStuck, stuckLate), Healthy: hold, Health: healthy},
			phase: store.PhaseIdle},
		{name: "not observed: no health check",
			in:    Input{Plan: plan(store.PhaseRejoining, nil), Healthy: hold},
			phase: store.PhaseIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Timing, in.Host, in.Node = t0, timing, back, restartedNode(nil)
			d := Step(in)
			if d.Plan.Phase != tt.phase || (tt.wait != NotWaiting && d.Waiting.Kind != tt.wait) {
				t.Fatalf("phase %s waiting %q (%s), want %s %v", d.Plan.Phase, d.Waiting, d.Waiting.Kind.Name(), tt.phase, tt.wait.Name())
			}
			if tt.lastError != "" && d.Plan.LastError != tt.lastError {
				t.Errorf("last error %q, want %q", d.Plan.LastError, tt.lastError)
			}
			if d.Unhealthy != tt.unhealthy {
				t.Errorf("unhealthy %q, want %q", d.Unhealthy, tt.unhealthy)
			}
			// A slot freed unhealthy says so in its plan (back_in_service)
			// and its history; a healthy one does not.
			if d.Plan.Phase == store.PhaseIdle {
				if d.Plan.LastUnhealthy != tt.unhealthy {
					t.Errorf("plan's last unhealthy %q, want %q", d.Plan.LastUnhealthy, tt.unhealthy)
				}
				if want := map[bool]string{true: unhealthyReleased + tt.unhealthy}[tt.unhealthy != ""]; d.History == nil || d.History.Error != want {
					t.Errorf("history %+v, want error %q", d.History, want)
				}
			}
		})
	}
}

// ignore_system_jobs = false holds a host whose agent runs as a system job on
// its node; the drain spec carries the group's options.
func TestDrainOptions(t *testing.T) {
	in := Input{Now: t0, Timing: timing, Host: host("b1", true), Node: node(nil), Plan: plan(store.PhasePending, nil),
		Admitted: true, NewGrantID: "g2", SystemJobs: []string{"default/rollboot", "default/exporter"}}
	in.Host.AgentJob = "default/rollboot"
	if d := Step(in); d.Plan.Phase != store.PhaseDraining {
		t.Fatalf("default options: phase %s (%s)", d.Plan.Phase, d.Waiting)
	}
	in.Drain.DrainSystemJobs = true
	d := Step(in)
	if d.Plan.Phase != store.PhasePending || d.Waiting.Kind != WaitDrainStopsAgent {
		t.Fatalf("system jobs drained with the agent a system job: phase %s (%s)", d.Plan.Phase, d.Waiting)
	}
	in.Host.AgentJob = "" // the agent runs outside Nomad
	if d := Step(in); d.Plan.Phase != store.PhaseDraining {
		t.Fatalf("agent outside Nomad: phase %s (%s)", d.Plan.Phase, d.Waiting)
	}
	if s := DrainSpec(in); s.IgnoreSystemJobs || s.Deadline != 0 {
		t.Errorf("spec %+v", s)
	}
	in.Timing.ForceOnTimeout, in.Timing.DrainDeadline = true, 2*time.Hour
	in.Drain.DrainSystemJobs = false
	if s := DrainSpec(in); !s.IgnoreSystemJobs || s.Deadline != 2*time.Hour {
		t.Errorf("spec %+v", s)
	}
	for _, tc := range []struct {
		jobs    []string
		ns, job string
		want    bool
	}{
		{[]string{"cache"}, "default", "cache", true},
		{[]string{"cache"}, "ops", "cache", true},
		{[]string{"ops/cache"}, "default", "cache", false},
		{[]string{"ops/cache"}, "ops", "cache", true},
		{[]string{"web"}, "default", "cache", false},
	} {
		if got := StopsJob(tc.jobs, tc.ns, tc.job); got != tc.want {
			t.Errorf("StopsJob(%v, %s, %s) = %v", tc.jobs, tc.ns, tc.job, got)
		}
	}
}

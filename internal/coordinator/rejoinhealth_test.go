package coordinator

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	rejoinhealth "github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// The healthy checks in the phase machine: a rejoining host whose node is back
// waits for its allocations (and checks) to be healthy; past the deadline it is
// stuck (hold) or done with an alert (release); a stuck host whose workloads
// turn healthy finishes its cycle.
func TestStepHealthyAfterReboot(t *testing.T) {
	yes, no := true, false
	hold := rejoinhealth.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoinhealth.OnDeadlineHold}
	release := rejoinhealth.Settings{Deadline: 10 * time.Minute, OnDeadline: rejoinhealth.OnDeadlineRelease}
	unhealthy := &rejoinhealth.Observed{Allocs: []rejoinhealth.Alloc{{Name: "web.web[0]", JobType: "service",
		DesiredStatus: "run", ClientStatus: "running", Healthy: &no}}}
	healthy := &rejoinhealth.Observed{Allocs: []rejoinhealth.Alloc{{Name: "web.web[0]", JobType: "service",
		DesiredStatus: "run", ClientStatus: "running", Healthy: &yes}}}
	critical := &rejoinhealth.Observed{Checks: []rejoinhealth.Check{{Name: "http", ServiceName: "api", Status: "critical"}}}
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
				Healthy: rejoinhealth.Settings{Deadline: time.Hour, OnDeadline: "hold", ConsulChecks: true}},
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
	if s := drainSpec(in); s.IgnoreSystemJobs || s.Deadline != 0 {
		t.Errorf("spec %+v", s)
	}
	in.Timing.ForceOnTimeout, in.Timing.DrainDeadline = true, 2*time.Hour
	in.Drain.DrainSystemJobs = false
	if s := drainSpec(in); !s.IgnoreSystemJobs || s.Deadline != 2*time.Hour {
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
		if got := stopJob(tc.jobs, tc.ns, tc.job); got != tc.want {
			t.Errorf("stopJob(%v, %s, %s) = %v", tc.jobs, tc.ns, tc.job, got)
		}
	}
}

// A group's options apply to its hosts; the default group's without them.
func TestGroupOptionsInInput(t *testing.T) {
	web := GroupOptions{Drain: DrainOptions{Deadline: 2 * time.Hour, StopJobs: []string{"cache"}},
		Healthy: rejoinhealth.Settings{Deadline: time.Minute, OnDeadline: "release"}}
	c := New(Options{Timing: timing, Groups: []GroupSpec{{Options: web}}})
	c.opt.Groups[0].Name = "web"
	s := &snapshot{}
	in := Input{Plan: plan(store.PhaseDraining, nil), Group: "other", Timing: timing}
	c.withGroupOptions(s, "h1", &in)
	if in.Timing.DrainDeadline != 2*time.Hour || in.Healthy != web.Healthy || len(in.Drain.StopJobs) != 1 {
		t.Errorf("in a cycle, the plan's group decides: %+v %+v %+v", in.Timing, in.Healthy, in.Drain)
	}
	in = Input{Plan: plan(store.PhaseIdle, nil), Group: "other", Timing: timing}
	c.withGroupOptions(s, "h1", &in)
	if in.Timing.DrainDeadline != timing.DrainDeadline || in.Healthy != DefaultGroupOptions.Healthy {
		t.Errorf("default group: %+v %+v", in.Timing, in.Healthy)
	}
}

// A window must leave room for the group's own drain deadline.
func TestGroupDrainDeadlineForWindows(t *testing.T) {
	c := New(Options{Timing: timing, Groups: []GroupSpec{{Options: GroupOptions{Drain: DrainOptions{Deadline: 2 * time.Hour}}}}})
	c.opt.Groups[0].Name = "batch"
	r := c.admitRules()
	if got := r.drainDeadlineOf("batch"); got != 2*time.Hour {
		t.Errorf("batch: %s", got)
	}
	if got := r.drainDeadlineOf("default"); got != timing.DrainDeadline {
		t.Errorf("default: %s", got)
	}
}

// countingNodes answers Allocations with allocs and counts the reads.
type countingNodes struct {
	NodesAPI
	reads  int
	allocs []*api.Allocation
}

func (n *countingNodes) Allocations(string, *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error) {
	n.reads++
	return n.allocs, &api.QueryMeta{LastIndex: 1}, nil
}

// The observer takes a watched node's allocations from its watch, and reads
// them itself otherwise, once per pass: the system jobs and the workloads'
// health of a rebooted node share one read.
func TestNodeAllocsFromTheWatch(t *testing.T) {
	yes := true
	run := func(name string, healthy *bool) *api.Allocation {
		return &api.Allocation{Name: name, DesiredStatus: "run", ClientStatus: "running", Job: &api.Job{Type: new(api.JobTypeService)},
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: healthy}}
	}
	n := &countingNodes{allocs: []*api.Allocation{run("web.web[0]", nil)}}
	c := New(Options{Nodes: n})
	pass := &snapshot{}
	got, err := c.nodeAllocs(t.Context(), pass, "n1")
	if err != nil || n.reads != 1 || len(got) != 1 || got[0].Healthy != nil {
		t.Fatalf("direct read: %+v %v, %d reads", got, err, n.reads)
	}
	if _, err := c.systemJobs(t.Context(), pass, "n1"); err != nil || n.reads != 1 {
		t.Fatalf("%d reads for the system jobs in the same pass (%v), want 1", n.reads, err)
	}
	c.cacheNodeAllocs("n1", []*api.Allocation{run("web.web[0]", &yes)})
	got, _ = c.nodeAllocs(t.Context(), &snapshot{}, "n1")
	if n.reads != 1 || got[0].Healthy == nil || !*got[0].Healthy {
		t.Fatalf("from the watch: %+v, %d reads", got, n.reads)
	}
	c.cacheNodeAllocs("n1", nil) // the watch ended
	if _, err := c.nodeAllocs(t.Context(), &snapshot{}, "n1"); err != nil || n.reads != 2 {
		t.Fatalf("%d reads after the watch ended, want 2", n.reads)
	}
}

package coordinator

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// A group's options apply to its hosts; the default group's without them.
func TestGroupOptionsInInput(t *testing.T) {
	web := rules.GroupOptions{Drain: phase.DrainOptions{Deadline: 2 * time.Hour, StopJobs: []string{"cache"}},
		Healthy: rejoin.Settings{Deadline: time.Minute, OnDeadline: "release"}}
	c := New(Options{Rules: rules.Rules{Timing: timing, Groups: []rules.GroupSpec{{Options: web}}}})
	c.opt.Groups[0].Name = "web"
	s := &snapshot{}
	in := phase.Input{Plan: plan(store.PhaseDraining, nil), Group: "other", Timing: timing}
	c.withGroupOptions(s, "h1", &in)
	if in.Timing.DrainDeadline != 2*time.Hour || in.Healthy != web.Healthy || len(in.Drain.StopJobs) != 1 {
		t.Errorf("in a cycle, the plan's group decides: %+v %+v %+v", in.Timing, in.Healthy, in.Drain)
	}
	in = phase.Input{Plan: plan(store.PhaseIdle, nil), Group: "other", Timing: timing}
	c.withGroupOptions(s, "h1", &in)
	if in.Timing.DrainDeadline != timing.DrainDeadline || in.Healthy != rules.DefaultGroupOptions.Healthy {
		t.Errorf("default group: %+v %+v", in.Timing, in.Healthy)
	}
}

// A window must leave room for the group's own drain deadline.
func TestGroupDrainDeadlineForWindows(t *testing.T) {
	c := New(Options{
		Rules: rules.Rules{
			Timing: timing,
			Groups: []rules.GroupSpec{{Options: rules.GroupOptions{Drain: phase.DrainOptions{Deadline: 2 * time.Hour}}}},
		},
	})
	c.opt.Groups[0].Name = "batch"
	r := c.admitRules()
	if got := r.DrainDeadlineOf("batch"); got != 2*time.Hour {
		t.Errorf("batch: %s", got)
	}
	if got := r.DrainDeadlineOf("default"); got != timing.DrainDeadline {
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
	c := New(Options{Deps: Deps{Nodes: n}})
	c.takeMail() // a pass
	got, err := c.nodeAllocs(t.Context(), "n1")
	if err != nil || n.reads != 1 || len(got) != 1 || got[0].Healthy != nil {
		t.Fatalf("direct read: %+v %v, %d reads", got, err, n.reads)
	}
	if _, err := c.systemJobs(t.Context(), "n1"); err != nil || n.reads != 1 {
		t.Fatalf("%d reads for the system jobs in the same pass (%v), want 1", n.reads, err)
	}
	c.mail.SetAllocs("n1", []*api.Allocation{run("web.web[0]", &yes)}) // the watch answers
	c.takeMail()
	got, _ = c.nodeAllocs(t.Context(), "n1")
	if n.reads != 1 || got[0].Healthy == nil || !*got[0].Healthy {
		t.Fatalf("from the watch: %+v, %d reads", got, n.reads)
	}
	c.mail.SetAllocs("n1", nil) // the watch ended
	c.takeMail()
	if _, err := c.nodeAllocs(t.Context(), "n1"); err != nil || n.reads != 2 {
		t.Fatalf("%d reads after the watch ended, want 2", n.reads)
	}
}

package bench

import (
	"testing"
	"time"
)

// With several rollouts at a host count, each has its own rows, named by its
// number, and each is judged: one rollout over the goal fails the run.
func TestEachRolloutJudged(t *testing.T) {
	rollout := func(run int, makespan time.Duration) *Rollout {
		return &Rollout{Hosts: 1000, Groups: 10, Concurrency: 5, Run: run, Runs: 2, Completed: true,
			Makespan: makespan, LowerBound: 100 * time.Second, SentinelToPend: []time.Duration{time.Millisecond}}
	}
	for _, tt := range []struct {
		second time.Duration
		failed bool
	}{{104 * time.Second, false}, {106 * time.Second, true}} {
		rep := &Report{Rollouts: []*Rollout{rollout(1, 103*time.Second), rollout(2, tt.second)}}
		var labels []string
		for _, row := range rep.Rows() {
			if row.Figure == "makespan / lower bound" {
				labels = append(labels, row.Hosts)
			}
		}
		if len(labels) != 2 || labels[0] != "1000 (1/2)" || labels[1] != "1000 (2/2)" {
			t.Errorf("makespan rows for %q, want one per rollout, numbered", labels)
		}
		if got := rep.Failed(); got != tt.failed {
			t.Errorf("second rollout at %.2f: failed %t, want %t", tt.second.Seconds()/100, got, tt.failed)
		}
	}
	one := &Rollout{Hosts: 1000, Run: 1, Runs: 1}
	if got := one.Label(); got != "1000" {
		t.Errorf("a single rollout is labelled %q, want its host count", got)
	}
}

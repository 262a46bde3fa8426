package rejoin

import (
	"errors"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	yes, no := true, false
	hold := Settings{Deadline: 10 * time.Minute, OnDeadline: OnDeadlineHold}
	release := Settings{Deadline: 10 * time.Minute, OnDeadline: OnDeadlineRelease}
	consul := Settings{Deadline: 10 * time.Minute, OnDeadline: OnDeadlineHold, ConsulChecks: true}
	running := func(name, typ string, healthy *bool) Alloc {
		return Alloc{Name: name, JobType: typ, DesiredStatus: "run", ClientStatus: "running", Healthy: healthy}
	}
	tests := []struct {
		name    string
		o       Observed
		s       Settings
		elapsed time.Duration
		want    Verdict
	}{
		{"no allocations", Observed{}, hold, time.Minute, Verdict{}},
		{"all healthy", Observed{Allocs: []Alloc{running("web.web[0]", "service", &yes), running("log.log[0]", "system", &yes)}},
			hold, time.Minute, Verdict{}},
		{"unhealthy", Observed{Allocs: []Alloc{running("web.web[0]", "service", &no)}}, hold, time.Minute,
			Verdict{Hold: Allocs, Detail: "web.web[0] unhealthy"}},
		{"health not set yet", Observed{Allocs: []Alloc{running("web.web[0]", "service", nil)}}, hold, time.Minute,
			Verdict{Hold: Starting, Detail: "web.web[0] health not set yet"}},
		{"pending", Observed{Allocs: []Alloc{{Name: "web.web[1]", JobType: "service", DesiredStatus: "run", ClientStatus: "pending"}}},
			hold, time.Minute, Verdict{Hold: Starting, Detail: "web.web[1] pending"}},
		{"one unhealthy among starting ones", Observed{Allocs: []Alloc{running("web.web[0]", "service", nil), running("web.web[1]", "service", &no)}},
			hold, time.Minute, Verdict{Hold: Allocs, Detail: "web.web[0] health not set yet, web.web[1] unhealthy"}},
		{"unknown until the client reports", Observed{Allocs: []Alloc{{Name: "log.log[0]", JobType: "system", DesiredStatus: "run", ClientStatus: "unknown"}}},
			hold, time.Minute, Verdict{Hold: Starting, Detail: "log.log[0] unknown"}},
		{"failed client status", Observed{Allocs: []Alloc{{Name: "b.b[0]", JobType: "batch", DesiredStatus: "run", ClientStatus: "failed"}}},
			hold, time.Minute, Verdict{Hold: Allocs, Detail: "b.b[0] failed"}},
		{"failed task", Observed{Allocs: []Alloc{{Name: "web.web[0]", JobType: "service", DesiredStatus: "run", ClientStatus: "running", Healthy: &yes, FailedTask: "app"}}},
			hold, time.Minute, Verdict{Hold: Allocs, Detail: "web.web[0] task app failed"}},
		{"batch running or complete needs no health", Observed{Allocs: []Alloc{running("b.b[0]", "batch", nil),
			{Name: "b.b[1]", JobType: "batch", DesiredStatus: "run", ClientStatus: "complete"}}}, hold, time.Minute, Verdict{}},
		{"stopping allocations are left out", Observed{Allocs: []Alloc{{Name: "old.old[0]", JobType: "service", DesiredStatus: "stop", ClientStatus: "running", Healthy: &no}}},
			hold, time.Minute, Verdict{}},
		{"past the deadline: hold", Observed{Allocs: []Alloc{running("web.web[0]", "service", &no)}}, hold, 11 * time.Minute,
			Verdict{Hold: Allocs, Detail: "web.web[0] unhealthy", Past: true}},
		{"past the deadline: release", Observed{Allocs: []Alloc{running("web.web[0]", "service", &no)}}, release, 11 * time.Minute,
			Verdict{Hold: Allocs, Detail: "web.web[0] unhealthy", Past: true, Release: true}},
		{"healthy past the deadline is healthy", Observed{Allocs: []Alloc{running("web.web[0]", "service", &yes)}}, release, time.Hour, Verdict{}},
		{"just before the deadline is not past it", Observed{Allocs: []Alloc{running("web.web[0]", "service", &no)}}, release, 10*time.Minute - time.Nanosecond,
			Verdict{Hold: Allocs, Detail: "web.web[0] unhealthy"}},
		{"at the deadline is past it (the loop wakes a pass then)", Observed{Allocs: []Alloc{running("web.web[0]", "service", &no)}}, release, 10 * time.Minute,
			Verdict{Hold: Allocs, Detail: "web.web[0] unhealthy", Past: true, Release: true}},
		{"allocations unreadable: hold", Observed{AllocsErr: errors.New("allocations of node n1: 500")}, hold, time.Minute,
			Verdict{Hold: Allocs, Detail: "allocations of node n1: 500"}},
		{"many problems are cut", Observed{Allocs: []Alloc{running("a[0]", "service", &no), running("a[1]", "service", &no),
			running("a[2]", "service", &no), running("a[3]", "service", &no), running("a[4]", "service", &no)}}, hold, time.Minute,
			Verdict{Hold: Allocs, Detail: "a[0] unhealthy, a[1] unhealthy, a[2] unhealthy (and 2 more)"}},
		{"checks ignored unless asked", Observed{Checks: []Check{{Name: "http", ServiceName: "api", Status: "critical"}}}, hold, time.Minute, Verdict{}},
		{"service check critical", Observed{Checks: []Check{{Name: "Serf Health Status", Status: "passing"}, {Name: "http", ServiceName: "api", Status: "critical"}}},
			consul, time.Minute, Verdict{Hold: Checks, Detail: "service:api critical"}},
		{"node check warning", Observed{Checks: []Check{{Name: "Node Maintenance Mode", Status: "critical"}}}, consul, time.Minute,
			Verdict{Hold: Checks, Detail: "Node Maintenance Mode critical"}},
		{"checks pass", Observed{Checks: []Check{{Name: "http", ServiceName: "api", Status: "passing"}}}, consul, time.Minute, Verdict{}},
		{"checks unreadable: hold", Observed{ChecksErr: errors.New("consul health of node h1: connection refused")}, consul, time.Minute,
			Verdict{Hold: Checks, Detail: "consul health of node h1: connection refused"}},
		{"allocations come before checks", Observed{Allocs: []Alloc{running("web.web[0]", "service", nil)},
			Checks: []Check{{Name: "http", ServiceName: "api", Status: "critical"}}}, consul, time.Minute,
			Verdict{Hold: Starting, Detail: "web.web[0] health not set yet"}},
		{"still starting past the deadline", Observed{Allocs: []Alloc{{Name: "web.web[1]", JobType: "service", DesiredStatus: "run", ClientStatus: "pending"}}},
			hold, 11 * time.Minute, Verdict{Hold: Starting, Detail: "web.web[1] pending", Past: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.o, tt.s, tt.elapsed); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

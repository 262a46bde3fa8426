package nomadsim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// groupDown replays the event log for one task group and returns, at every event
// once the group has first been fully healthy, the number of its allocations that
// are down in the drainer's sense: count minus the allocations that have their
// health set and are neither marked for migration nor stopping nor stopped. It
// returns the largest such number and the event where it was first seen.
func groupDown(events []Event, job, group string, count int) (peak, atSeq int) {
	type st struct{ health, marked, stopped bool }
	allocs := map[string]*st{}
	armed := false
	for _, e := range events {
		if e.Details["job"] != job || e.Details["group"] != group {
			continue
		}
		id := e.Details["alloc_id"]
		a := allocs[id]
		if a == nil {
			a = &st{}
			allocs[id] = a
		}
		switch e.Type {
		case EventAllocHealth:
			a.health = true
		case EventAllocMigrate:
			a.marked = true
		case EventAllocStopping, EventAllocStop:
			a.stopped = true
		}
		up := 0
		for _, a := range allocs {
			if a.health && !a.marked && !a.stopped {
				up++
			}
		}
		if up == count {
			armed = true
		}
		if armed && count-up > peak {
			peak, atSeq = count-up, e.Seq
		}
	}
	return peak, atSeq
}

// Several nodes drained at the same moment, with a service group spread over all of
// them: at no state change of the emulator are more allocations of the group down
// (marked, stopping or stopped, their replacement not yet healthy) than its
// migrate.max_parallel, and the drains do reach that limit. Nomad before 1.10.3
// counted an allocation marked for migration as healthy until the scheduler stopped
// it, so the second and third drains would each have taken one more down.
func TestConcurrentDrainsRespectMaxParallel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		count, maxP int
		drain       int // nodes drained at once
	}{
		{name: "max_parallel 1", count: 6, maxP: 1, drain: 3},
		{name: "max_parallel 2", count: 8, maxP: 2, drain: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c := newTestSim(t, Config{Clients: 6, MigrateTime: 60 * time.Millisecond, MinHealthyTime: 120 * time.Millisecond})
			if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "front", Count: tc.count, MigrateMaxParallel: tc.maxP}}}); err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			healthy := func(v *View) bool {
				n := 0
				for _, a := range v.Allocs("") {
					if a.DesiredStatus == "run" && a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil {
						n++
					}
				}
				return n == tc.count
			}
			if err := s.WaitFor(ctx, healthy); err != nil {
				t.Fatal(err)
			}

			var ids []string
			for i := 1; i <= tc.drain; i++ {
				ids = append(ids, nodeID(t, s, fmt.Sprintf("client-%d", i)))
			}
			// Start every drain at the same moment.
			var wg sync.WaitGroup
			idx := make([]uint64, len(ids))
			start := make(chan struct{})
			for i, id := range ids {
				wg.Go(func() {
					<-start
					resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}, false, nil)
					if err != nil {
						t.Error(err)
						return
					}
					idx[i] = resp.LastIndex
				})
			}
			close(start)
			wg.Wait()
			if t.Failed() {
				return
			}
			for i, id := range ids {
				wg.Go(func() { runMonitorDrain(ctx, t, c, id, idx[i], true) })
			}
			wg.Wait()

			peak, at := groupDown(s.Events(0), "web", "front", tc.count)
			if peak > tc.maxP {
				t.Fatalf("%d allocations of web.front down at event %d; max_parallel is %d", peak, at, tc.maxP)
			}
			if peak != tc.maxP {
				t.Fatalf("at most %d allocations were down at once; the concurrent drains should have reached max_parallel %d", peak, tc.maxP)
			}
			// Every allocation left the drained nodes and is healthy elsewhere.
			if err := s.WaitFor(ctx, healthy); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				as, _, err := c.Nodes().Allocations(id, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					if a.ClientStatus != "complete" || a.DesiredTransition.Migrate == nil || !*a.DesiredTransition.Migrate {
						t.Fatalf("allocation %s on drained node: %s, migrate %v", a.Name, a.ClientStatus, a.DesiredTransition.Migrate)
					}
				}
			}
		})
	}
}

// A replacement is healthy only after it ran for min_healthy_time, and only then
// does the drainer migrate the next allocation of a max_parallel = 1 group. The
// group's migrate block shows the times through the api.
func TestMinHealthyTimeGatesTheNextMigration(t *testing.T) {
	const minHealthy = 300 * time.Millisecond
	s, c := newTestSim(t, Config{Clients: 3, MigrateTime: 40 * time.Millisecond})
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "front", Count: 2, MigrateMinHealthyTime: minHealthy}}}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	id := nodeID(t, s, "client-1")
	as := waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool {
		return len(as) == 1 && as[0].DeploymentStatus != nil && as[0].DeploymentStatus.Healthy != nil
	})
	m := as[0].Job.TaskGroups[0].Migrate
	if *m.MaxParallel != 1 || *m.MinHealthyTime != minHealthy || *m.HealthyDeadline != s.Config().HealthyDeadline || !*as[0].DeploymentStatus.Healthy {
		t.Fatalf("migrate = %d %v %v, healthy %v", *m.MaxParallel, *m.MinHealthyTime, *m.HealthyDeadline, *as[0].DeploymentStatus.Healthy)
	}
	// The default comes from Config.MinHealthyTime (Nomad's 10s, scaled).
	if err := s.AddJob(JobSpec{ID: "api"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Jobs()[1].Groups[0].MigrateMinHealthyTime; got != s.Config().MinHealthyTime || got != 200*time.Millisecond {
		t.Fatalf("default min_healthy_time = %v", got)
	}

	// Drain client-1 and client-2 at once: web has one allocation on each.
	seq := len(s.Events(0))
	for _, h := range []string{"client-1", "client-2"} {
		if _, err := c.Nodes().UpdateDrain(nodeID(t, s, h), &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	id2 := nodeID(t, s, "client-2")
	err := s.WaitFor(ctx, func(v *View) bool {
		n, _ := v.Node(id2)
		return n.DrainStrategy == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Between the two migrations of web lies a replacement that started and then
	// ran for min_healthy_time before it was marked healthy.
	var marks []time.Time
	started := map[string]time.Time{}
	var healthyAfter []time.Duration
	for _, e := range s.Events(seq) {
		if e.Details["job"] != "web" {
			continue
		}
		switch e.Type {
		case EventAllocMigrate:
			marks = append(marks, e.Time)
		case EventAllocStart:
			started[e.Details["alloc_id"]] = e.Time
		case EventAllocHealth:
			healthyAfter = append(healthyAfter, e.Time.Sub(started[e.Details["alloc_id"]]))
			if len(marks) == 1 && e.Details["healthy"] != "true" {
				t.Fatalf("replacement health %s", e.Details["healthy"])
			}
		}
	}
	if len(marks) < 2 || len(healthyAfter) == 0 {
		t.Fatalf("%d migrations, %d health updates", len(marks), len(healthyAfter))
	}
	// Event times are read a little after the emulator round's clock, so allow
	// one round (MigrateTime/2) of slack on the start event.
	if healthyAfter[0] < minHealthy-s.Config().MigrateTime/2 {
		t.Fatalf("replacement healthy %v after it started; min_healthy_time is %v", healthyAfter[0], minHealthy)
	}
	if gap := marks[1].Sub(marks[0]); gap < minHealthy {
		t.Fatalf("second migration %v after the first; want at least min_healthy_time %v", gap, minHealthy)
	}
}

// Health set means set, true or false (AllocDeploymentStatus.HasHealth): while no
// allocation of the group has its health, nothing is migrated; once the clients
// mark them unhealthy at the healthy deadline, the drainer counts them as healthy
// and the drain goes on, as in Nomad.
func TestUnhealthyAllocationsCountForTheDrainer(t *testing.T) {
	const deadline = 600 * time.Millisecond
	s, c := newTestSim(t, Config{Clients: 3, MigrateTime: 40 * time.Millisecond})
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "front", Count: 2,
		MigrateHealthyDeadline: deadline, FailHealthChecks: true}}}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	id := nodeID(t, s, "client-1")
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool { return len(as) == 1 && as[0].ClientStatus == "running" })
	resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Before the deadline: running, no health, nothing migrated.
	as, _, err := c.Nodes().Allocations(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].DeploymentStatus != nil || as[0].DesiredTransition.Migrate != nil {
		t.Fatalf("before the healthy deadline: %+v, migrate %v", as[0].DeploymentStatus, as[0].DesiredTransition.Migrate)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	runMonitorDrain(dctx, t, c, id, resp.LastIndex, true)

	var health []string
	var firstMark, firstHealth int
	for _, e := range s.Events(0) {
		switch {
		case e.Type == EventAllocHealth && e.Details["job"] == "web":
			health = append(health, e.Details["healthy"])
			if firstHealth == 0 {
				firstHealth = e.Seq
			}
		case e.Type == EventAllocMigrate && e.Details["job"] == "web" && firstMark == 0:
			firstMark = e.Seq
		}
	}
	if len(health) < 2 || health[0] != "false" || health[1] != "false" {
		t.Fatalf("health updates %v; want the first two unhealthy", health)
	}
	if firstMark < firstHealth {
		t.Fatalf("migration (event %d) before any health was set (event %d)", firstMark, firstHealth)
	}
	as, _, _ = c.Nodes().Allocations(id, nil)
	if d := as[0].DeploymentStatus; d == nil || d.Healthy == nil || *d.Healthy {
		t.Fatalf("old allocation's health %+v; want false", d)
	}
}

// The control API takes the migrate times as Go durations and gives them back the
// same way; a negative time is refused.
func TestControlAPIMigrateFields(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1})
	base := s.Address() + controlPrefix
	var jobs []JobSpec
	code := ctl(t, "POST", base+"jobs", `{"id":"web","groups":[{"name":"front","count":2,"migrate_max_parallel":2,
		"migrate_min_healthy_time":"1s","migrate_healthy_deadline":"90s","fail_health_checks":true}]}`, &jobs)
	if code != 200 || len(jobs) != 1 {
		t.Fatalf("add job: %d %+v", code, jobs)
	}
	g := jobs[0].Groups[0]
	if g.MigrateMaxParallel != 2 || g.MigrateMinHealthyTime != time.Second || g.MigrateHealthyDeadline != 90*time.Second || !g.FailHealthChecks {
		t.Fatalf("group %+v", g)
	}
	var listed []map[string]any
	if code := ctl(t, "GET", base+"jobs", "", &listed); code != 200 || len(listed) != 1 {
		t.Fatalf("list: %d %v", code, listed)
	}
	grp := listed[0]["groups"].([]any)[0].(map[string]any)
	if grp["migrate_min_healthy_time"] != "1s" || grp["migrate_healthy_deadline"] != "1m30s" {
		t.Fatalf("listed group %v", grp)
	}
	var e map[string]string
	if code := ctl(t, "POST", base+"jobs", `{"id":"neg","groups":[{"name":"g","migrate_min_healthy_time":"-1s"}]}`, &e); code != 400 || !strings.Contains(e["error"], "must not be negative") {
		t.Fatalf("negative: %d %v", code, e)
	}
	if code := ctl(t, "POST", base+"jobs", `{"id":"bad","groups":[{"name":"g","migrate_healthy_deadline":"soon"}]}`, &e); code != 400 || !strings.Contains(e["error"], "migrate_healthy_deadline") {
		t.Fatalf("bad duration: %d %v", code, e)
	}
}

package workload

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSingletons(t *testing.T) {
	web := TaskGroup{Job: JobKey{Namespace: "default", ID: "web"}, Group: "api"}
	db := TaskGroup{Job: JobKey{Namespace: "data", ID: "db"}, Group: "pg"}
	on := func(g TaskGroup, node, typ string, count int, mod func(*GroupAlloc)) GroupAlloc {
		a := GroupAlloc{TaskGroup: g, NodeID: node, JobType: typ, Count: count, Healthy: true}
		if mod != nil {
			mod(&a)
		}
		return a
	}
	terminal := func(a *GroupAlloc) { a.Terminal, a.Healthy = true, false }
	unhealthy := func(a *GroupAlloc) { a.Healthy = false }
	tests := []struct {
		name   string
		onNode []GroupAlloc
		jobs   map[JobKey][]GroupAlloc
		want   []TaskGroup
	}{
		{name: "count 1, alone", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{web.Job: {on(web, "n1", "service", 1, nil)}}, want: []TaskGroup{web}},
		{name: "count 2: not a singleton", onNode: []GroupAlloc{on(web, "n1", "service", 2, nil)}},
		{name: "a system job: not moved by a drain", onNode: []GroupAlloc{on(web, "n1", "system", 1, nil)}},
		{name: "a batch job of count 1", onNode: []GroupAlloc{on(db, "n1", "batch", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{db.Job: {on(db, "n1", "batch", 1, nil)}}, want: []TaskGroup{db}},
		{name: "stopped on the node: nothing to stop", onNode: []GroupAlloc{on(web, "n1", "service", 1, terminal)}},
		{name: "another healthy instance elsewhere (a canary)", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{web.Job: {on(web, "n1", "service", 1, nil), on(web, "n2", "service", 1, nil)}}},
		{name: "the other instance unhealthy", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{web.Job: {on(web, "n2", "service", 1, unhealthy)}}, want: []TaskGroup{web}},
		{name: "the other instance stopped", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{web.Job: {on(web, "n2", "service", 1, terminal)}}, want: []TaskGroup{web}},
		{name: "another group of the job elsewhere does not count", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			jobs: map[JobKey][]GroupAlloc{web.Job: {on(TaskGroup{Job: web.Job, Group: "cache"}, "n2", "service", 1, nil)}}, want: []TaskGroup{web}},
		{name: "the job's allocations not read: fails closed", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil)},
			want: []TaskGroup{web}},
		{name: "two, sorted, once each", onNode: []GroupAlloc{on(web, "n1", "service", 1, nil), on(db, "n1", "service", 1, nil),
			on(web, "n1", "service", 1, nil)}, want: []TaskGroup{db, web}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Singletons("n1", Candidates("n1", tt.onNode), tt.jobs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Singletons = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSingletonHold(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	web := TaskGroup{Job: JobKey{ID: "web"}, Group: "api"}
	db := TaskGroup{Job: JobKey{Namespace: "data", ID: "db"}, Group: "pg"}
	tests := []struct {
		name       string
		singletons []TaskGroup
		until      time.Time
		want       string // a part; "" for no hold
	}{
		{name: "none", singletons: nil},
		{name: "one, not approved", singletons: []TaskGroup{web}, want: "runs the only instance of job group web.api (count = 1): a drain stops it; rollboot approve h1 lets it drain"},
		{name: "two", singletons: []TaskGroup{db, web}, want: "job groups data/db.pg, web.api"},
		{name: "approved", singletons: []TaskGroup{web}, until: now.Add(time.Minute)},
		{name: "the approval expired", singletons: []TaskGroup{web}, until: now, want: "rollboot approve h1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SingletonHold("h1", tt.singletons, tt.until, now)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("SingletonHold = %q, want %q", got, tt.want)
			}
		})
	}
}

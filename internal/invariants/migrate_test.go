package invariants

import (
	"testing"

	ns "github.com/rollboot/rollboot/internal/nomadsim"
)

// alloc builds an allocation event of web.front.
func alloc(typ, id string, details ...string) ns.Event {
	d := map[string]string{"alloc_id": id, "job": "web", "namespace": "default", "group": "front"}
	for i := 0; i+1 < len(details); i += 2 {
		d[details[i]] = details[i+1]
	}
	return ns.Event{Type: typ, Host: "h", Details: d}
}

// healthy is an allocation placed, started and marked healthy.
func healthy(id string) []ns.Event {
	return []ns.Event{alloc(ns.EventAllocPlace, id), alloc(ns.EventAllocStart, id), alloc(ns.EventAllocHealth, id, "healthy", "true")}
}

// migrate is one migration of old to new: marked, stopped, replaced, healthy.
func migrate(old, new string) []ns.Event {
	return append([]ns.Event{alloc(ns.EventAllocMigrate, old), alloc(ns.EventAllocStopping, old)}, healthy(new)...)
}

func TestCheckMigrations(t *testing.T) {
	jobs := func(mp int) []ns.JobSpec {
		return []ns.JobSpec{{ID: "web", Type: "service", Groups: []ns.GroupSpec{{Name: "front", Count: 3, MigrateMaxParallel: mp}}},
			{ID: "exporter", Type: "system"}}
	}
	start := seq(healthy("a"), healthy("b"), healthy("c"))
	tests := []struct {
		name   string
		events []ns.Event
		jobs   []ns.JobSpec
		want   []int
		peak   int
	}{
		{
			name:   "one migration after the other",
			events: seq(start, migrate("a", "a2"), migrate("b", "b2")),
			jobs:   jobs(1), peak: 1,
		},
		{
			name: "two marked at once with max_parallel 1",
			events: seq(start, []ns.Event{alloc(ns.EventAllocMigrate, "a"), alloc(ns.EventAllocMigrate, "b")},
				healthy("a2"), healthy("b2")),
			jobs: jobs(1), want: []int{6}, peak: 2,
		},
		{
			name: "two marked at once with max_parallel 2",
			events: seq(start, []ns.Event{alloc(ns.EventAllocMigrate, "a"), alloc(ns.EventAllocMigrate, "b")},
				healthy("a2"), healthy("b2")),
			jobs: jobs(2), peak: 2,
		},
		{
			name: "a replacement running but not yet healthy is still down",
			events: seq(start, []ns.Event{alloc(ns.EventAllocMigrate, "a"), alloc(ns.EventAllocStopping, "a"),
				alloc(ns.EventAllocPlace, "a2"), alloc(ns.EventAllocStart, "a2"), alloc(ns.EventAllocMigrate, "b")},
				healthy("b2"), []ns.Event{alloc(ns.EventAllocHealth, "a2", "healthy", "true")}),
			jobs: jobs(1), want: []int{6}, peak: 2,
		},
		{
			name:   "an unhealthy replacement counts as up, as for Nomad's drainer",
			events: seq(start, migrate("a", "a2")[:4], []ns.Event{alloc(ns.EventAllocStart, "a2"), alloc(ns.EventAllocHealth, "a2", "healthy", "false")}, migrate("b", "b2")),
			jobs:   jobs(1), peak: 1,
		},
		{
			name:   "the initial placement is not counted",
			events: seq([]ns.Event{alloc(ns.EventAllocPlace, "a"), alloc(ns.EventAllocPlace, "b")}, healthy("c")),
			jobs:   jobs(1), peak: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.events, nil, Spec{Jobs: tc.jobs})
			var got []int
			for _, v := range res.Violations {
				got = append(got, v.Invariant)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Fatalf("violations %v; want invariants %v", res.Violations, tc.want)
			}
			if res.MigratePeak["web.front"] != tc.peak {
				t.Fatalf("peak %d; want %d", res.MigratePeak["web.front"], tc.peak)
			}
		})
	}
}

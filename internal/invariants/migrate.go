package invariants

import (
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// migrateInvariant is the number Violation.Invariant carries for invariant 6:
// drains, however many run at once, never take more allocations of a service task
// group down than its migrate max_parallel.
const migrateInvariant = 6

// allocSeen is what the event log tells of one allocation.
type allocSeen struct {
	key     string // the task group: "[namespace/]job.group"
	health  bool   // its client set its health (true or false)
	marked  bool   // marked for migration
	stopped bool   // told to stop, or stopped on the client
}

// groupKey names a task group in Result.MigratePeak.
func groupKey(ns, job, group string) string {
	if ns == "" || ns == "default" {
		return job + "." + group
	}
	return ns + "/" + job + "." + group
}

// checkMigrations replays the allocation events and reports every moment at which
// more allocations of a service group are down than its max_parallel. An
// allocation is up, as Nomad's drainer counts it (drainer/watch_jobs.go
// handleTaskGroup, Nomad 1.10.3 and later), when its health is set and it is
// neither marked for migration nor stopping nor stopped; down is the group's count
// minus those. A group is watched only from the first moment all of its
// allocations were up, so the initial placement does not count. It returns the
// violations and, per group, the largest number down at once.
func checkMigrations(events []nomadsim.Event, jobs []nomadsim.JobSpec) ([]Violation, map[string]int) {
	type limits struct{ count, maxParallel int }
	groups := map[string]limits{}
	for _, j := range jobs {
		if j.Type != "" && j.Type != api.JobTypeService {
			continue
		}
		for _, g := range j.Groups {
			mp := g.MigrateMaxParallel
			if mp == 0 {
				mp = 1 // nomad/structs DefaultMigrateStrategy
			}
			count := g.Count
			if count == 0 {
				count = 1
			}
			groups[groupKey(j.Namespace, j.ID, g.Name)] = limits{count, mp}
		}
	}
	var out []Violation
	allocs := map[string]*allocSeen{}
	up := map[string]int{}
	armed := map[string]bool{}
	over := map[string]bool{}
	peak := map[string]int{}
	for _, e := range events {
		id := e.Details["alloc_id"]
		if id == "" {
			continue
		}
		key := groupKey(e.Details["namespace"], e.Details["job"], e.Details["group"])
		lim, ok := groups[key]
		if !ok {
			continue
		}
		a := allocs[id]
		if a == nil {
			a = &allocSeen{key: key}
			allocs[id] = a
		}
		wasUp := a.health && !a.marked && !a.stopped
		switch e.Type {
		case nomadsim.EventAllocHealth:
			a.health = true
		case nomadsim.EventAllocMigrate:
			a.marked = true
		case nomadsim.EventAllocStopping, nomadsim.EventAllocStop:
			a.stopped = true
		}
		isUp := a.health && !a.marked && !a.stopped
		switch {
		case isUp && !wasUp:
			up[key]++
		case wasUp && !isUp:
			up[key]--
		}
		if up[key] >= lim.count {
			armed[key] = true
		}
		if !armed[key] {
			continue
		}
		down := max(0, lim.count-up[key])
		peak[key] = max(peak[key], down)
		if down > lim.maxParallel && !over[key] {
			out = append(out, Violation{migrateInvariant, e.Host, e.Seq, fmt.Sprintf(
				"%d allocations of %s down at once; its migrate max_parallel is %d", down, key, lim.maxParallel)})
		}
		over[key] = down > lim.maxParallel
	}
	return out, peak
}

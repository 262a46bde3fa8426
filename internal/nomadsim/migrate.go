package nomadsim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Event types of the migration model, in addition to those in sim.go and jobs.go.
const (
	// EventAllocMigrate: the drainer marked an allocation for migration
	// (DesiredTransition.Migrate); the scheduler stops and replaces it in a later
	// round (EventAllocStopping, EventAllocPlace).
	EventAllocMigrate = "alloc.migrate"
	// EventAllocHealth: the client set the allocation's health
	// (DeploymentStatus.Healthy), "healthy" = "true" or "false".
	EventAllocHealth = "alloc.health"
)

// migrateDefaults fills a service group's unset migrate times from the
// configuration (nomad/structs/structs.go DefaultMigrateStrategy: min_healthy_time
// 10s, healthy_deadline 5m, scaled by Config).
func (s *Sim) migrateDefaults(g *GroupSpec) {
	if g.MigrateMinHealthyTime == 0 {
		g.MigrateMinHealthyTime = s.cfg.MinHealthyTime
	}
	if g.MigrateHealthyDeadline == 0 {
		g.MigrateHealthyDeadline = s.cfg.HealthyDeadline
	}
}

// minHealthyTime and healthyDeadline are the health parameters the client uses for
// the allocation (client/allocrunner/health_hook.go getHealthParams: the group's
// migrate block; a group without one, as a system job's, uses
// DefaultMigrateStrategy).
func (sa *simAlloc) minHealthyTime(s *Sim) time.Duration {
	if g := sa.job.group(sa.a.TaskGroup); g != nil && g.MigrateMinHealthyTime > 0 {
		return g.MigrateMinHealthyTime
	}
	return s.cfg.MinHealthyTime
}

func (sa *simAlloc) healthyDeadline(s *Sim) time.Duration {
	if g := sa.job.group(sa.a.TaskGroup); g != nil && g.MigrateHealthyDeadline > 0 {
		return g.MigrateHealthyDeadline
	}
	return s.cfg.HealthyDeadline
}

// allocHealthLocked is the client's health watcher for a running allocation
// (client/allocrunner/health_hook.go watchHealth, client/allochealth/tracker.go):
// only service and system allocations are watched; health is set once, to true when
// the tasks have run for min_healthy_time (and the checks pass), or to false when
// the healthy deadline passes first. The update reaches the servers with the
// client's next alloc update (Node.UpdateAlloc), which sets
// DeploymentStatus.Healthy. The drainer counts any allocation whose health is set,
// true or false, as healthy (drainer/watch_jobs.go handleTaskGroup,
// AllocDeploymentStatus.HasHealth).
func (c *clusterState) allocHealthLocked(s *Sim, sa *simAlloc, now time.Time) {
	a := sa.a
	typ := *a.Job.Type
	if typ != api.JobTypeService && typ != api.JobTypeSystem {
		return
	}
	if a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil {
		return
	}
	fail := false
	if g := sa.job.group(a.TaskGroup); g != nil {
		fail = g.FailHealthChecks
	}
	var healthy bool
	switch {
	case !fail && !sa.healthAt.IsZero() && !now.Before(sa.healthAt) && !sa.healthAt.After(sa.healthDeadline):
		healthy = true
	case !now.Before(sa.healthDeadline):
		healthy = false
	default:
		return
	}
	idx := c.touchAllocLocked(s, a)
	a.DeploymentStatus = &api.AllocDeploymentStatus{Healthy: pointerOf(healthy), Timestamp: now, ModifyIndex: idx}
	c.allocEventLocked(s, EventAllocHealth, a, map[string]string{"healthy": strconv.FormatBool(healthy)})
}

// allocHasHealth is AllocDeploymentStatus.HasHealth: health set, true or false.
func allocHasHealth(a *api.Allocation) bool {
	return a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil
}

// UnmarshalJSON accepts the migrate times as Go duration strings or integer ns.
func (g *GroupSpec) UnmarshalJSON(b []byte) error {
	type plain GroupSpec
	aux := struct {
		*plain
		MinHealthy json.RawMessage `json:"migrate_min_healthy_time,omitempty"`
		Deadline   json.RawMessage `json:"migrate_healthy_deadline,omitempty"`
	}{plain: (*plain)(g)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	var err error
	if g.MigrateMinHealthyTime, err = decodeDurationJSON(aux.MinHealthy); err != nil {
		return fmt.Errorf("group %s: migrate_min_healthy_time: %w", g.Name, err)
	}
	if g.MigrateHealthyDeadline, err = decodeDurationJSON(aux.Deadline); err != nil {
		return fmt.Errorf("group %s: migrate_healthy_deadline: %w", g.Name, err)
	}
	return nil
}

// MarshalJSON writes the migrate times as Go duration strings.
func (g GroupSpec) MarshalJSON() ([]byte, error) {
	type plain GroupSpec
	aux := struct {
		plain
		MinHealthy string `json:"migrate_min_healthy_time,omitempty"`
		Deadline   string `json:"migrate_healthy_deadline,omitempty"`
	}{plain: plain(g)}
	if g.MigrateMinHealthyTime != 0 {
		aux.MinHealthy = g.MigrateMinHealthyTime.String()
	}
	if g.MigrateHealthyDeadline != 0 {
		aux.Deadline = g.MigrateHealthyDeadline.String()
	}
	return json.Marshal(aux)
}

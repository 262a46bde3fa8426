package nomadsim

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// EventAllocStopRequested: someone asked Nomad to stop an allocation
// (POST /v1/allocation/:id/stop); the scheduler stops and replaces it in its next
// round (EventAllocStopping, EventAllocPlace).
const EventAllocStopRequested = "alloc.stop_requested"

// registerAllocRoutes serves the allocation endpoints the emulator models.
func (s *Sim) registerAllocRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/allocation/", methods(s.handleAllocStop, http.MethodPost, http.MethodPut))
}

// handleAllocStop answers POST|PUT /v1/allocation/:id/stop (command/agent
// alloc_endpoint.go allocStop → nomad/alloc_endpoint.go Alloc.Stop): the
// allocation is looked up by its full ID (404 "alloc not found"), the token needs
// alloc-lifecycle in the allocation's namespace (403), and the stop is an
// Alloc.UpdateDesiredTransition with DesiredTransition.Migrate = true committed
// with an evaluation triggered by "alloc-stop": the scheduler stops the
// allocation and places a replacement where it can (never on a node that is
// draining or ineligible), without the group's migrate block, which only the
// drainer follows. The answer is the evaluation's ID and the index of the write.
func (s *Sim) handleAllocStop(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/allocation/"), "/stop")
	if !ok || id == "" || strings.Contains(id, "/") {
		simhttp.WriteError(w, http.StatusNotFound, "Invalid URL")
		return
	}
	s.mu.Lock()
	sa, found := s.cluster.allocs[id]
	ns := ""
	if found {
		ns = sa.a.Namespace
	}
	s.mu.Unlock()
	if !found {
		simhttp.WriteError(w, http.StatusNotFound, "alloc not found")
		return
	}
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNamespace(ns, "alloc-lifecycle") }) == nil {
		return
	}
	evalID, idx, err := s.stopAlloc(id)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	w.Header().Set("X-Nomad-Index", fmt.Sprint(idx))
	writeJSON(w, http.StatusOK, api.AllocStopResponse{EvalID: evalID})
}

// stopAlloc marks the allocation for migration, as Alloc.Stop does, for the
// scheduler's next round (scheduleLocked stops it and places its replacement).
func (s *Sim) stopAlloc(id string) (string, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.cluster
	defer c.endBatch()
	sa, ok := c.allocs[id]
	if !ok {
		return "", 0, simhttp.Code(http.StatusNotFound, "alloc not found")
	}
	evalID := s.uuidLocked()
	if allocTerminal(sa.a) || allocShouldMigrate(sa.a) {
		// Nothing to stop: Nomad commits the transition all the same.
		return evalID, c.writeLocked(s), nil
	}
	sa.a.DesiredTransition.Migrate = pointerOf(true)
	// The scheduler processes the evaluation in its next round, like the
	// drainer's marks (markMigrateLocked).
	sa.markRound = c.drainRound
	idx := c.touchAllocLocked(s, sa.a)
	c.allocEventLocked(s, EventAllocStopRequested, sa.a, map[string]string{"eval_id": evalID})
	return evalID, idx, nil
}

// ReplaceUnhealthy models an operator fixing job's health checks with a new
// version of the job: its groups' checks pass from now on (FailHealthChecks
// off), and each live allocation its client marked unhealthy is replaced, as a
// destructive update replaces allocations (scheduler/reconcile.go
// computeUpdates; the system scheduler's diffSystemAllocs "update" on the same
// node). The replacements are placed by the scheduler's next round and become
// healthy after their min_healthy_time.
func (s *Sim) ReplaceUnhealthy(namespace, job string) error {
	if namespace == "" {
		namespace = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.cluster
	defer c.endBatch()
	j, ok := c.jobs[jobKey{namespace, job}]
	if !ok {
		return fmt.Errorf("no job %q in namespace %q", job, namespace)
	}
	for i := range j.spec.Groups {
		j.spec.Groups[i].FailHealthChecks = false
	}
	now := time.Now()
	for _, id := range c.allocOrder {
		sa := c.allocs[id]
		a := sa.a
		if a.JobID != job || a.Namespace != namespace || allocTerminal(a) || !allocHasHealth(a) || *a.DeploymentStatus.Healthy {
			continue
		}
		c.stopAllocLocked(s, sa, now, "alloc is being updated due to job update")
	}
	return nil
}

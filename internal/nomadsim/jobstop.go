package nomadsim

import (
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"
)

// StopJob stops a job, as `nomad job stop` without -purge does
// (nomad/job_endpoint.go Job.Deregister; nomad/fsm.go handleJobDeregister
// keeps the job with Stop set, a new version at a new JobModifyIndex). The
// deregistration's evaluation stops every live allocation ("alloc not needed
// due to job update": scheduler/generic_sched.go and scheduler_system.go
// allocNotNeeded) and places none, so it succeeds: the job's blocked
// evaluation is cancelled (state_store.go nestedUpsertEval, evals.go) and its
// active deployment is cancelled (DeploymentStatusDescriptionStoppedJob). The
// job stays listed, with Stop true and status dead (state_store.go
// getJobStatus: at once for a system job; the emulator does so for every type,
// where Nomad keeps a service or batch job running until its allocations are
// terminal). UpdateJob runs it again. Stopping a stopped job changes nothing.
func (s *Sim) StopJob(namespace, id string) error {
	if namespace == "" {
		namespace = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.cluster
	defer c.endBatch()
	j := c.jobs[jobKey{namespace, id}]
	if j == nil {
		return fmt.Errorf("job %s in namespace %s does not exist", id, namespace)
	}
	if jobStopped(j) {
		return nil
	}
	idx := c.writeLocked(s)
	nj := *j.job
	nj.Stop, nj.Status = pointerOf(true), pointerOf("dead")
	nj.Version = pointerOf(*j.job.Version + 1)
	nj.ModifyIndex, nj.JobModifyIndex = pointerOf(idx), pointerOf(idx)
	nj.Stable = pointerOf(false)
	j.job = &nj
	now := time.Now()
	for _, aid := range c.allocOrder {
		sa := c.allocs[aid]
		if sa.job == j && !allocTerminal(sa.a) {
			c.stopAllocLocked(s, sa, now, "alloc not needed due to job update")
		}
	}
	if d := c.wl.current[j.key()]; d != nil {
		c.wl.setStatusLocked(s, d, api.DeploymentStatusCancelled, "Cancelled because job is stopped")
	}
	c.wl.stoppedLocked(s, j, s.uuidLocked())
	c.scheduleLocked(s, now)
	return nil
}

// jobStopped reports whether the job was stopped (structs.Job.Stopped).
func jobStopped(j *simJob) bool { return j.job.Stop != nil && *j.job.Stop }

package nomadsim

import (
	"time"

	"github.com/hashicorp/nomad/api"
)

// Blocked evaluations. When the scheduler cannot place every allocation a
// service or batch group wants (no ready, eligible node of the job's pool that
// is not draining: scheduler/generic_sched.go computeJobAllocs records the
// failed placements), it creates a blocked evaluation for the job
// (generic_sched.go createBlockedEval → structs.Evaluation.CreateBlockedEval:
// status "blocked", TriggeredBy "queued-allocs"), which nomad/blocked_evals.go
// tracks, one per job (BlockedEvals.processBlock keeps the newest). A node that
// becomes ready or eligible unblocks it (BlockedEvals.Unblock); the scheduler
// then places what was missing and the evaluation completes. The emulator keeps
// only these evaluations: its scheduler runs without any.

// blockedJob is a job with a blocked evaluation, and what each group could not
// place.
type blockedJob struct {
	eval     *api.Evaluation
	unplaced map[string]int
}

// unplacedLocked records what the scheduler could not place of a group this
// round (need <= 0: everything was placed).
func (w *workloadState) unplacedLocked(s *Sim, j *simJob, group string, need int) {
	b := w.blocked[j.key()]
	if need <= 0 {
		if b == nil {
			return
		}
		delete(b.unplaced, group)
		if len(b.unplaced) > 0 {
			return
		}
		idx := s.cluster.writeLocked(s)
		b.eval.Status, b.eval.StatusDescription = "complete", ""
		b.eval.ModifyIndex, b.eval.ModifyTime, w.evalIndex = idx, time.Now().UnixNano(), idx
		delete(w.blocked, j.key())
		return
	}
	if b != nil {
		if b.unplaced[group] != need {
			b.unplaced[group] = need
			b.eval.QueuedAllocations[group] = need
		}
		return
	}
	idx := s.cluster.writeLocked(s)
	now := time.Now().UnixNano()
	e := &api.Evaluation{
		ID: s.uuidLocked(), Namespace: j.spec.Namespace, Priority: *j.job.Priority, Type: j.spec.Type,
		TriggeredBy: "queued-allocs", JobID: j.spec.ID, JobModifyIndex: *j.job.JobModifyIndex,
		Status: "blocked", StatusDescription: "created to place remaining allocations",
		QueuedAllocations: map[string]int{group: need},
		CreateIndex:       idx, ModifyIndex: idx, CreateTime: now, ModifyTime: now,
	}
	w.evals[e.ID] = e
	w.evalOrder = append(w.evalOrder, e.ID)
	w.evalIndex = idx
	w.blocked[j.key()] = &blockedJob{eval: e, unplaced: map[string]int{group: need}}
}

package nomadsim

import (
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Blocked evaluations. The emulator keeps only these evaluations: its
// scheduler runs without any.
//
// Service and batch jobs. When the scheduler cannot place every allocation a
// group wants (no ready, eligible node of the job's pool that is not draining,
// or none with room: scheduler/generic_sched.go computeJobAllocs records the
// failed placements), it creates a blocked evaluation for the job
// (generic_sched.go createBlockedEval → structs.Evaluation.CreateBlockedEval:
// status "blocked", TriggeredBy "queued-allocs"), which nomad/blocked_evals.go
// tracks, one per job (BlockedEvals.processBlock keeps the newest). A node that
// becomes ready or eligible unblocks it (BlockedEvals.Unblock); the scheduler
// then places what was missing and the evaluation completes.
//
// System jobs (scheduler/scheduler_system.go and nomad/blocked_evals*.go as
// read in 1.10.5; the same in 1.9.7, 1.11.3 and main, 2.0).
// The system scheduler wants one allocation on every ready node of the job's
// pool (util.go readyNodesInDCsAndPool; diffSystemAllocs). A node that the
// job's constraints filter out is skipped silently (computePlacements: the
// NodesFiltered branch creates no evaluation). A node that passes them but has
// no room for the allocation (the bin-packing iterator exhausts a dimension,
// AllocMetric.ExhaustedNode) is a failed placement: computePlacements records
// the group's metrics in FailedTGAllocs and calls addBlocked(node), which makes
// a blocked evaluation about that node (CreateBlockedEval, then NodeID = the
// node, StatusDescription "created to place remaining allocations"). Only the
// group's first such node in a run gets one: further failures of the group in
// the same run only count in its metrics (CoalescedFailures). The tracker
// (nomad/blocked_evals.go processBlock, blocked_evals_system.go systemEvals)
// files system evaluations by node as well as by job, and keeps one per job
// (processBlockJobDuplicate: the older is cancelled by the leader,
// leader.go reapDupBlockedEvaluations, "existing blocked evaluation exists for
// job"), so of a run in which two groups fail only the second's stays blocked,
// with both groups' metrics (the emulator makes only that one, about the
// first node without room). It is run again when its node changes (BlockedEvals.UnblockNode, from
// nomad/fsm.go applyStatusUpdate to ready, applyNodeEligibilityUpdate to
// eligible, applyAllocClientUpdate for an allocation that completed or failed
// there) or when capacity of its node class appears (Unblock): the run places
// the allocation and completes the evaluation, or completes it with failures
// and blocks a new one (PreviousEval). An evaluation of the job that succeeds
// with no failed placement (a node update that took the node out of the
// candidates, a job registered or stopped) cancels every blocked evaluation of
// the job (nomad/state/state_store.go nestedUpsertEval: "evaluation %q
// successful"; fsm.go handleUpsertedEval → BlockedEvals.Untrack).
//
// The emulator's scheduler round stands for the evaluations Nomad runs
// (scheduleLocked), so it tells, for a system job's blocked evaluation, which
// evaluation Nomad would have run since it was made (evalTriggers): the
// evaluation itself, unblocked by a node that became ready or eligible or
// registered ready, or by an allocation that completed (Unblock, UnblockNode:
// a system evaluation is unblocked by any node class it did not find
// infeasible, classes it never saw included, so by a change anywhere); a node
// update's evaluation of the job (node_endpoint.go createNodeEvals: a node of
// its pool went down or disconnected, came back, or was marked eligible); or
// the job's registration (a new version, a stop). None: it stays blocked, even
// when its node was cordoned since (UpdateEligibility to ineligible and a
// drain's start create no evaluation). The evaluation itself: it completes,
// with the failed placements of its run if any, and blocks a new one about the
// first node (in host order; Nomad's is a map's) that still lacks room. Another
// evaluation: it is cancelled, as successful or as a duplicate of the new one.

// blockedJob is a job with a blocked evaluation: for a service or batch job,
// what each group could not place; a system job's evaluation is about one node
// (its NodeID).
type blockedJob struct {
	eval     *api.Evaluation
	unplaced map[string]int
	// unblockSeen and nodeEvalSeen: the evalTriggers of a system job's
	// evaluation when it was made.
	unblockSeen, nodeEvalSeen uint64
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
		w.endBlockedLocked(s, j, "complete", "")
		return
	}
	if b != nil {
		if b.unplaced[group] != need {
			b.unplaced[group] = need
			b.eval.QueuedAllocations[group] = need
		}
		return
	}
	e := w.newBlockedLocked(s, j, s.uuidLocked())
	e.QueuedAllocations = map[string]int{group: need}
	w.blocked[j.key()] = &blockedJob{eval: e, unplaced: map[string]int{group: need}}
}

// newBlockedLocked stores a new blocked evaluation of job j, made by the
// evaluation prev (structs.Evaluation.CreateBlockedEval).
func (w *workloadState) newBlockedLocked(s *Sim, j *simJob, prev string) *api.Evaluation {
	idx := s.cluster.writeLocked(s)
	now := time.Now().UnixNano()
	e := &api.Evaluation{
		ID: s.uuidLocked(), Namespace: j.spec.Namespace, Priority: *j.job.Priority, Type: j.spec.Type,
		TriggeredBy: "queued-allocs", JobID: j.spec.ID, JobModifyIndex: *j.job.JobModifyIndex,
		Status: "blocked", StatusDescription: "created to place remaining allocations", PreviousEval: prev,
		CreateIndex: idx, ModifyIndex: idx, CreateTime: now, ModifyTime: now,
	}
	w.evals[e.ID] = e
	w.evalOrder = append(w.evalOrder, e.ID)
	w.evalIndex = idx
	return e
}

// endBlockedLocked ends job j's blocked evaluation with status (complete, or
// canceled with desc) and forgets it. It returns the evaluation's ID ("" when
// there was none).
func (w *workloadState) endBlockedLocked(s *Sim, j *simJob, status, desc string) string {
	b := w.blocked[j.key()]
	if b == nil {
		return ""
	}
	idx := s.cluster.writeLocked(s)
	b.eval.Status, b.eval.StatusDescription = status, desc
	b.eval.ModifyIndex, b.eval.ModifyTime, w.evalIndex = idx, time.Now().UnixNano(), idx
	delete(w.blocked, j.key())
	return b.eval.ID
}

// evalCancelled is structs.EvalStatusCancelled (spelt so).
const evalCancelled = "canceled"

// successfulDesc is the description of a blocked evaluation cancelled by a
// successful evaluation of its job (state_store.go nestedUpsertEval).
func successfulDesc(evalID string) string { return fmt.Sprintf("evaluation %q successful", evalID) }

// stoppedLocked cancels the blocked evaluation of a job just stopped: the
// deregistration's evaluation stops every allocation and places none, so it
// succeeds (nomad/job_endpoint.go Deregister makes it; nestedUpsertEval
// cancels the blocked one).
func (w *workloadState) stoppedLocked(s *Sim, j *simJob, evalID string) {
	w.endBlockedLocked(s, j, evalCancelled, successfulDesc(evalID))
}

// sysFailure is a system group that did not fit on a node that passed its
// filters, in one scheduler round.
type sysFailure struct {
	group     string
	node      *simNode
	dimension string // what was exhausted: "cpu" or "memory" (ComparableResources.Superset)
}

// systemFailuresLocked records the failed placements of system job j in one
// scheduler round (fails: each group's first node without room, in host
// order; candidates: the ready nodes of its pool, readyNodesInDCsAndPool).
func (w *workloadState) systemFailuresLocked(s *Sim, j *simJob, fails []sysFailure, candidates int) {
	var metrics map[string]*api.AllocationMetric
	if len(fails) > 0 {
		metrics = failedTGAllocs(s, j, fails, candidates)
	}
	prev := ""
	if b := w.blocked[j.key()]; b != nil {
		switch w.triggers.ranSince(j, b) {
		case noRun:
			return // blocked until something runs it again
		case ownRun:
			// Unblocked and run: complete, with the run's failed placements.
			b.eval.FailedTGAllocs = metrics
			prev = w.endBlockedLocked(s, j, "complete", "")
		case otherRun:
			// A node update's or the job's evaluation ran (and succeeded,
			// or blocked a newer one: processBlockJobDuplicate).
			prev = s.uuidLocked()
			desc := successfulDesc(prev)
			if len(fails) > 0 {
				desc = fmt.Sprintf("existing blocked evaluation exists for job %q", j.spec.ID)
			}
			w.endBlockedLocked(s, j, evalCancelled, desc)
		}
	}
	if len(fails) == 0 {
		return
	}
	if prev == "" {
		prev = s.uuidLocked() // the evaluation that ran (job registration, node update)
	}
	e := w.newBlockedLocked(s, j, prev)
	e.NodeID = fails[0].node.node.ID
	e.FailedTGAllocs = metrics
	b := &blockedJob{eval: e}
	b.unblockSeen, b.nodeEvalSeen = w.triggers.unblock, w.triggers.nodeEvalsOf(j)
	w.blocked[j.key()] = b
}

// evalTriggers counts the changes that make Nomad run a system job's
// evaluation again.
type evalTriggers struct {
	// unblock counts the calls of BlockedEvals.Unblock and UnblockNode
	// (nomad/fsm.go): a node registered ready (applyUpsertNode), a node's
	// status to ready (applyStatusUpdate), a node marked eligible
	// (applyNodeEligibilityUpdate), an allocation its client completed or
	// failed (applyAllocClientUpdate).
	unblock uint64
	// nodeEval counts, by node pool, the node updates that evaluate the pool's
	// system jobs (node_endpoint.go createNodeEvals: Register and
	// UpdateStatus when shouldCreateNodeEval or
	// nodeStatusTransitionRequiresEval says so, a node going down included;
	// UpdateDrain and UpdateEligibility marking it eligible); nodeEvalAll
	// counts them in every pool, for jobs of the pool "all".
	nodeEval    map[string]uint64
	nodeEvalAll uint64
	// seen is each node's status and eligibility at its last write.
	seen map[string]nodeSeen
	// undrainUnblocks: a drain update that marks an ineligible node eligible
	// (a drain cancelled with MarkEligible, or a drain's end) also unblocks,
	// as nomad/fsm.go applyDrainUpdate does from Nomad 1.11.2 and 2.0.0
	// (PR #27488, backported in #27489). Before, only applyBatchDrainUpdate
	// and applyNodeEligibilityUpdate did, so an undrain left a system job's
	// blocked evaluation about the node waiting for the node's next other
	// change. Set from Config.NomadVersion (undrainUnblocksSince).
	undrainUnblocks bool
}

// undrainUnblocksSince is the first Nomad version whose applyDrainUpdate
// unblocks evaluations when it marks a node eligible.
const undrainUnblocksSince = "1.11.2"

type nodeSeen struct {
	status   string
	eligible bool
}

// nodeWrittenLocked counts what a write of node n (of the event type typ,
// touchNodeLocked) triggers.
func (t *evalTriggers) nodeWrittenLocked(n *api.Node, typ string) {
	if t.seen == nil {
		t.seen, t.nodeEval = map[string]nodeSeen{}, map[string]uint64{}
	}
	prev, known := t.seen[n.ID]
	now := nodeSeen{status: n.Status, eligible: n.SchedulingEligibility == api.NodeSchedulingEligible}
	t.seen[n.ID] = now
	ready := now.status == api.NodeStatusReady
	if !known {
		prev.status = api.NodeStatusInit // Register: shouldCreateNodeEval with no original
	}
	becameEligible := known && now.eligible && !prev.eligible
	unblock, nodeEval := false, false
	switch typ {
	case eventNodeRegistration:
		// Register: Unblock when ready; an evaluation when the status moved or
		// the node is down (a change of what feasibility reads also makes
		// one: it runs with the unblocked evaluation, which counts first).
		unblock = ready
		nodeEval = now.status == api.NodeStatusDown || nodeStatusTransitionRequiresEval(now.status, prev.status)
	case eventNodeStatus:
		unblock = ready && prev.status != api.NodeStatusReady
		nodeEval = now.status == api.NodeStatusDown || nodeStatusTransitionRequiresEval(now.status, prev.status)
	case eventNodeEligibility:
		unblock, nodeEval = becameEligible, becameEligible
	case eventNodeDrain:
		// applyDrainUpdate: an eligible node's drain update unblocks only
		// from undrainUnblocksSince; the evaluation of the node update
		// (node_endpoint.go UpdateDrain) comes in every version.
		unblock, nodeEval = becameEligible && t.undrainUnblocks, becameEligible
	}
	if unblock {
		t.unblock++
	}
	if nodeEval {
		t.nodeEval[n.NodePool]++
		t.nodeEvalAll++
	}
}

// nodeStatusTransitionRequiresEval is node_endpoint.go's: the status
// transitions that evaluate the node's jobs.
func nodeStatusTransitionRequiresEval(now, prev string) bool {
	return (prev == api.NodeStatusInit && now == api.NodeStatusReady) ||
		(prev == api.NodeStatusDown && now == api.NodeStatusReady) ||
		(prev == api.NodeStatusDisconnected && now != api.NodeStatusDisconnected) ||
		(prev != api.NodeStatusDisconnected && now == api.NodeStatusDisconnected)
}

// allocFreed counts an allocation its client completed or failed: its room
// is free (applyAllocClientUpdate → UnblockClassAndQuota, UnblockNode).
func (t *evalTriggers) allocFreed() { t.unblock++ }

// nodeEvalsOf is the count of node updates that evaluate job j.
func (t *evalTriggers) nodeEvalsOf(j *simJob) uint64 {
	if p := *j.job.NodePool; p != api.NodePoolAll {
		return t.nodeEval[p]
	}
	return t.nodeEvalAll
}

// Which evaluation of a system job ran since its blocked evaluation b was made.
const (
	noRun    = iota
	ownRun   // b itself, unblocked
	otherRun // the job's registration, or a node update's evaluation
)

func (t *evalTriggers) ranSince(j *simJob, b *blockedJob) int {
	switch {
	case b.eval.JobModifyIndex != *j.job.JobModifyIndex:
		return otherRun // Job.Register or Job.Deregister made one
	case t.unblock != b.unblockSeen:
		return ownRun
	case t.nodeEvalsOf(j) != b.nodeEvalSeen:
		return otherRun
	}
	return noRun
}

// failedTGAllocs are the metrics of a round's failed placements, by group, as
// computePlacements hands them to addBlocked: the one node evaluated and
// exhausted, on which dimension (AllocMetric.ExhaustedNode), the group's
// resources of that dimension (ExhaustResources), and NodesAvailable,
// NodesInPool and NodePool. The group's later failures in the run
// (CoalescedFailures) are counted after the blocked evaluation was made, so it
// shows none.
func failedTGAllocs(s *Sim, j *simJob, fails []sysFailure, candidates int) map[string]*api.AllocationMetric {
	out := make(map[string]*api.AllocationMetric, len(fails))
	for _, f := range fails {
		g := j.group(f.group)
		var cpu, mem int
		switch f.dimension {
		case "cpu":
			cpu = int(g.CPU)
		case "memory":
			mem = int(g.MemoryMB)
		}
		out[f.group] = &api.AllocationMetric{
			NodesEvaluated: 1, NodesExhausted: 1, NodesInPool: candidates, NodePool: *j.job.NodePool,
			NodesAvailable:     map[string]int{s.cfg.Datacenter: candidates},
			DimensionExhausted: map[string]int{f.dimension: 1},
			ResourcesExhausted: map[string]*api.Resources{f.group: {CPU: pointerOf(cpu), MemoryMB: pointerOf(mem)}},
		}
	}
	return out
}

// cloneEval copies an evaluation for an answer: its maps are written in place
// (QueuedAllocations) or replaced, never shared with the answer.
func cloneEval(e *api.Evaluation) *api.Evaluation {
	c := *e
	c.QueuedAllocations = maps.Clone(e.QueuedAllocations)
	if e.FailedTGAllocs != nil {
		c.FailedTGAllocs = make(map[string]*api.AllocationMetric, len(e.FailedTGAllocs))
		for g, m := range e.FailedTGAllocs {
			c.FailedTGAllocs[g] = cloneAPI(m)
		}
	}
	return &c
}

// Package workload decides the workload blockers of a rollout: a node that runs
// allocations of a blocking job is not drained, and no drain starts in a node
// pool while a deployment of one of its jobs is in progress or failed, or while
// evaluations of its service or batch jobs are blocked. It decides from what
// was observed (plain values); the coordinator reads them from Nomad
// (coordinator/admitreads.go).
package workload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-bexpr"
)

// Settings are the policy's workloads block.
type Settings struct {
	// JobFilter selects the blocking jobs (a bexpr over the job, evaluated by
	// Nomad's job list); "" means none.
	JobFilter string
	// Deployments: hold a pool while a deployment of one of its jobs is in
	// progress or failed (Held).
	Deployments bool
	// DeploymentFilter selects the jobs whose deployments count; "" means every
	// job.
	DeploymentFilter string
	// BlockedEvals: hold a pool while evaluations of its jobs are blocked
	// (those of service and batch jobs: Eval.HoldsPool).
	BlockedEvals bool
}

// Default is the workloads block with nothing written: no blocking job,
// deployments and blocked evaluations of every job hold their pool.
func Default() Settings { return Settings{Deployments: true, BlockedEvals: true} }

// Enabled reports whether any blocker is on: otherwise nothing is read.
func (s Settings) Enabled() bool { return s.JobFilter != "" || s.Deployments || s.BlockedEvals }

// CheckFilter reports why expr is not a valid filter expression (nil if it is).
func CheckFilter(expr string) error {
	if _, err := bexpr.CreateEvaluator(expr); err != nil {
		return fmt.Errorf("invalid filter expression %q: %v", expr, err)
	}
	return nil
}

// JobKey names a job: its namespace and ID.
type JobKey struct{ Namespace, ID string }

func (k JobKey) String() string {
	if k.Namespace == "" || k.Namespace == "default" {
		return k.ID
	}
	return k.Namespace + "/" + k.ID
}

// Alloc is an allocation on a node, as observed.
type Alloc struct {
	Job JobKey
	// Terminal: Nomad's Allocation.TerminalStatus (desired stop or evict, or
	// the client reports it complete, failed or lost). A terminal allocation
	// no longer runs, or is being stopped by Nomad.
	Terminal bool
}

// BlockingJobs returns the blocking jobs (sorted, each once) that still run
// allocations among allocs: the node is not drained while there is one.
func BlockingJobs(allocs []Alloc, blocking map[JobKey]bool) []JobKey {
	var out []JobKey
	for _, a := range allocs {
		if !a.Terminal && blocking[a.Job] && !slices.Contains(out, a.Job) {
			out = append(out, a.Job)
		}
	}
	slices.SortFunc(out, func(a, b JobKey) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Job is a job that can place allocations in a pool, as observed.
type Job struct {
	Key         JobKey
	CreateIndex uint64 // tells a job registered again after a purge from the old one
	Stopped     bool
}

// Deployment is a deployment as observed (nomad/structs.Deployment).
type Deployment struct {
	ID             string
	Job            JobKey
	JobCreateIndex uint64
	Status         string
	CreateIndex    uint64
}

// Deployment statuses (nomad/structs/deployment.go).
const (
	StatusRunning      = "running"
	StatusPaused       = "paused"
	StatusFailed       = "failed"
	StatusSuccessful   = "successful"
	StatusCancelled    = "cancelled"
	StatusInitializing = "initializing"
	StatusPending      = "pending"
	StatusBlocked      = "blocked"
	StatusUnblocking   = "unblocking"
)

// Held reports whether a job's latest deployment in this status holds its pool:
// every active status (structs.Deployment.Active: running, paused, pending,
// initializing, and blocked or unblocking for a multi-region deployment whose
// peers are not done), and failed. A failed deployment leaves the job on a
// version whose allocations went unhealthy, with no automatic revert or one
// still to come: a drain now would replace healthy allocations of the old
// version by allocations of the failing one. Successful and cancelled
// deployments (cancelled: the job was stopped or a newer version superseded
// it) do not hold. An unknown status holds (Nomad may add one).
func Held(status string) bool {
	switch status {
	case StatusSuccessful, StatusCancelled:
		return false
	}
	return true
}

// Eval is a blocked evaluation as observed.
type Eval struct {
	ID  string
	Job JobKey
	// Type is the type of the evaluation's job (structs.Evaluation.Type,
	// copied from the job by CreateBlockedEval).
	Type string
	// NodeID is the node a system or sysbatch job's evaluation is about: the
	// one where its allocation did not fit (scheduler_system.go addBlocked).
	// Empty for the other types.
	NodeID string
}

// Job types whose blocked evaluations are about one node (nomad/structs
// JobTypeSystem, JobTypeSysBatch).
const (
	jobTypeSystem   = "system"
	jobTypeSysBatch = "sysbatch"
)

// HoldsPool reports whether a blocked evaluation holds the drains of its
// job's pools: a service or batch job's does (its allocations wait for room
// anywhere in the pool, and a drain takes room away), a system or sysbatch
// job's does not, nor does it hold its own node.
//
// The system scheduler wants one allocation of the job on every ready node of
// its pool, each placed on its own node only (scheduler_system.go
// computePlacements), so a blocked evaluation of a system job says that one
// node (NodeID) lacks the room for that node's allocation. Draining other
// nodes takes no room from that node that the job could have (their
// replacements may land there, as any placement may), and never moves the
// job's allocations: they stay on their nodes and come back with them. Nor is
// the blocked node better left alone: the job does not run there, so its
// reboot interrupts nothing of the job; its drain moves the node's service and
// batch allocations away, and when it comes back ready and eligible, the
// change runs the evaluation again (nomad/blocked_evals.go UnblockNode) with
// the node's room free, which is the operator's own remedy (drain the node so
// that the system job fits). Held instead, the node would wait for room that
// only its drain would free, for ever when the node is simply smaller than the
// allocation. An evaluation of another type, or of no type, holds.
func (e Eval) HoldsPool() bool {
	switch e.Type {
	case jobTypeSystem, jobTypeSysBatch:
		return false
	}
	return true
}

// PoolView is what was observed of one node pool: the jobs that can place
// allocations in it (its own and those of the pool "all"), the jobs among
// them whose deployments count (workloads.deployment_filter), and every
// deployment and blocked evaluation.
type PoolView struct {
	Pool            string
	Jobs            map[JobKey]Job
	DeploymentJobs  map[JobKey]bool
	Deployments     []Deployment
	BlockedEvals    []Eval
	CheckDeployment bool
	CheckEvals      bool
}

// Hold is why a pool holds its drains; zero when it does not.
type Hold struct {
	Kind   Kind
	Detail string
}

// Kind is the blocker that holds.
type Kind int

const (
	None Kind = iota
	ByDeployment
	ByBlockedEvals
)

// PoolHold says why no drain starts in the pool now: a deployment first (the
// job's latest, of its current registration, in a status that holds), then
// blocked evaluations of its jobs (those that hold a pool: Eval.HoldsPool).
func PoolHold(v PoolView) Hold {
	if v.CheckDeployment {
		if h := deploymentHold(v); h.Kind != None {
			return h
		}
	}
	if v.CheckEvals {
		var jobs []string
		n := 0
		for _, e := range v.BlockedEvals {
			if _, ok := v.Jobs[e.Job]; !ok || !e.HoldsPool() {
				continue
			}
			n++
			if s := e.Job.String(); !slices.Contains(jobs, s) {
				jobs = append(jobs, s)
			}
		}
		if n > 0 {
			slices.Sort(jobs)
			what := "evaluation is"
			if n > 1 {
				what = "evaluations are"
			}
			return Hold{ByBlockedEvals, fmt.Sprintf("pool %s: %d %s blocked (job %s)", v.Pool, n, what, strings.Join(jobs, ", "))}
		}
	}
	return Hold{}
}

func deploymentHold(v PoolView) Hold {
	latest := map[JobKey]Deployment{}
	for _, d := range v.Deployments {
		j, ok := v.Jobs[d.Job]
		if !ok || !v.DeploymentJobs[d.Job] || j.Stopped || d.JobCreateIndex != j.CreateIndex {
			continue
		}
		if cur, ok := latest[d.Job]; !ok || d.CreateIndex > cur.CreateIndex {
			latest[d.Job] = d
		}
	}
	var held []string
	for k, d := range latest {
		if Held(d.Status) {
			held = append(held, fmt.Sprintf("deployment %s of job %s is %s", shortID(d.ID), k, d.Status))
		}
	}
	if len(held) == 0 {
		return Hold{}
	}
	slices.Sort(held)
	return Hold{ByDeployment, fmt.Sprintf("pool %s: %s", v.Pool, strings.Join(held, "; "))}
}

// shortID is the first 8 characters of an ID, as the nomad CLI shows them.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

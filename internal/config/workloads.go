package config

import (
	"reflect"

	"github.com/rollboot/rollboot/internal/workload"
)

// WorkloadsConfig is the policy's workloads block: the workload blockers
// (package workload).
type WorkloadsConfig struct {
	// JobFilter: a node is not drained while it runs allocations of a job this
	// filter (bexpr over the job, as `nomad job status -filter`) selects; ""
	// selects none.
	JobFilter string
	// Deployments: no drain starts in a node pool while a deployment of one of
	// its jobs (DeploymentFilter) is in progress or failed.
	Deployments bool
	// DeploymentFilter selects the jobs whose deployments count; "" every job.
	DeploymentFilter string
	// BlockedEvals: no drain starts in a node pool while evaluations of its
	// service or batch jobs are blocked (workload.Eval.HoldsPool).
	BlockedEvals bool
}

var workloadsTable = &table{typ: "workloads", of: reflect.TypeFor[WorkloadsConfig](), settings: []setting{
	{name: "job_filter", field: "JobFilter", def: workload.Default().JobFilter, check: value(jobFilter),
		doc: "A [go-bexpr](https://github.com/hashicorp/go-bexpr) expression over the Nomad job, the syntax " +
			"of `nomad job status -filter`, evaluated by Nomad (`GET /v1/jobs?filter=`) on the whole job: " +
			"`Meta.rollboot_block == \"true\"`, `Type == \"batch\" and Meta.team == \"etl\"`, `ID matches " +
			"\"^backup-\"`. A node is not drained while it runs a non-terminal allocation of a job it " +
			"selects (Nomad's `TerminalStatus`: not desired to stop, not complete, failed or lost): the " +
			"host waits with `runs allocations of job <job> (workloads.job_filter)` and is drained once the " +
			"allocation ends (a batch job that finishes, a job that is stopped). The syntax is checked when " +
			"the file is loaded. `\"\"`: no job blocks. Do not select system jobs: they never end, and " +
			"their nodes would never reboot."},
	{name: "deployments", field: "Deployments", def: workload.Default().Deployments,
		doc: "No drain starts in a node pool while the latest deployment of one of its jobs " +
			"(`deployment_filter`) is `running`, `paused`, `pending`, `initializing`, `blocked` or " +
			"`unblocking` (Nomad's active statuses; the last two for a multi-region deployment waiting for " +
			"its peers), or `failed`: a drain now would replace healthy allocations of the previous version " +
			"by allocations of the version that failed. `successful` and `cancelled` deployments do not " +
			"hold, nor those of a stopped job or of an earlier registration of the job (purged and run " +
			"again). A failed deployment holds until a new version of the job deploys, or the job is " +
			"stopped: the reason names the deployment and the job (`pool web: deployment 1c2b3a4d of job " +
			"api is failed`). A job's pools are its `node_pool`; a job in the pool `all` holds every pool."},
	{name: "deployment_filter", field: "DeploymentFilter", def: workload.Default().DeploymentFilter, check: value(jobFilter),
		doc: "A go-bexpr expression over the job selecting the jobs whose deployments hold (`Meta.critical " +
			"== \"true\"`); `\"\"` means every job. Checked when the file is loaded."},
	{name: "blocked_evals", field: "BlockedEvals", def: workload.Default().BlockedEvals,
		doc: "No drain starts in a node pool while an evaluation of one of its service or batch jobs is blocked (status " +
			"`blocked`: the scheduler could not place every allocation, for lack of a ready, eligible node " +
			"with room in the pool, and waits for capacity). Draining would take more capacity away. The " +
			"reason counts them: `pool batch: 2 evaluations are blocked (job etl, train)`. It holds until " +
			"the scheduler places what was missing (capacity freed, a node added) or the job is stopped. A " +
			"job that can never be placed (a constraint no node meets) holds its pools until it is fixed: " +
			"set `blocked_evals = false` to roll out regardless. A blocked evaluation of a system or " +
			"sysbatch job (its `Type`) is about one node (its `NodeID`) and holds nothing, neither the " +
			"pool nor that node: see [System jobs' blocked evaluations](#system-jobs-blocked-evaluations)."},
}}

// Settings are the block's settings as package workload takes them.
func (w WorkloadsConfig) Settings() workload.Settings {
	return workload.Settings{JobFilter: w.JobFilter, Deployments: w.Deployments, DeploymentFilter: w.DeploymentFilter, BlockedEvals: w.BlockedEvals}
}

// jobFilter checks a filter over jobs: "" or an expression.
func jobFilter(f string) error {
	if f == "" {
		return nil
	}
	return workload.CheckFilter(f)
}

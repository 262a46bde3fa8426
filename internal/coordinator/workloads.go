package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/workload"
)

// The workload blockers (policy block workloads, package workload): a node that
// runs allocations of a blocking job is not drained, and no drain starts in a
// node pool while a deployment of one of its jobs is in progress or failed, or
// while evaluations of its jobs are blocked. They are pre-filters of the
// admission queue, as settling is: a held host takes no slot, and hosts of
// other pools still go.
//
// What they read is read only while a host is in the admission queue, and only
// what its settings need: nothing for an idle cluster. While a host is held,
// a pass runs every workloadRecheck (nothing in Nomad's node list changes when
// a batch job finishes or a deployment succeeds), so the release comes within
// that time, not at the next resync.

// WorkloadSettings are the policy's workloads block.
type WorkloadSettings = workload.Settings

// WorkloadsAPI is the part of the Nomad API the workload blockers read;
// NomadWorkloads implements it over an *api.Client.
type WorkloadsAPI interface {
	ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error)
	ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error)
	ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error)
	JobAllocations(jobID string, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error)
}

// NomadWorkloads is WorkloadsAPI over a Nomad client.
type NomadWorkloads struct{ Client *api.Client }

// ListJobs lists jobs (nomad/job_endpoint.go Job.List).
func (n NomadWorkloads) ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error) {
	return n.Client.Jobs().List(q)
}

// ListDeployments lists deployments (nomad/deployment_endpoint.go Deployment.List).
func (n NomadWorkloads) ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	return n.Client.Deployments().List(q)
}

// ListEvaluations lists evaluations (nomad/eval_endpoint.go Eval.List).
func (n NomadWorkloads) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	return n.Client.Evaluations().List(q)
}

// JobAllocations lists a job's allocations (nomad/job_endpoint.go
// Job.Allocations).
func (n NomadWorkloads) JobAllocations(jobID string, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	return n.Client.Jobs().Allocations(jobID, false, q)
}

// workloadView is what a pass read for the workload blockers.
type workloadView struct {
	// jobErr: the blocking jobs could not be listed; every queued host with a
	// node holds.
	jobErr error
	// allocs: the allocations of each queued host's node, read when some job
	// matches job_filter; allocErr: the read failed.
	allocs   map[string][]workload.Alloc
	allocErr map[string]error
	blocking map[workload.JobKey]bool
	// pools: what was read of each node pool with a queued host; poolErr: a
	// read for the pool failed.
	pools   map[string]workload.PoolView
	poolErr map[string]error
	// holds: why each host read for is held (zero: it is not).
	holds map[string]phase.WaitReason
}

// hostPool is the node pool of a host's node ("" without a known node).
func hostPool(s *snapshot, hv *hostView) string {
	if hv.node == nil {
		return ""
	}
	if n := s.nodes[hv.node.ID]; n != nil {
		return n.NodePool
	}
	return ""
}

// readWorkloads reads what the workload blockers need to decide on hosts
// (queued hosts with a node), and why each is held.
func (c *Coordinator) readWorkloads(ctx context.Context, s *snapshot, hosts []string) {
	set := c.opt.Workloads
	pools := map[string]bool{}
	for _, name := range hosts {
		pools[hostPool(s, s.hosts[name])] = true
	}
	v := &workloadView{allocs: map[string][]workload.Alloc{}, allocErr: map[string]error{},
		pools: map[string]workload.PoolView{}, poolErr: map[string]error{}, holds: map[string]phase.WaitReason{}}
	s.workloads = v
	if set.JobFilter != "" {
		c.readBlockingJobs(ctx, s, v, hosts)
	}
	if set.Deployments || set.BlockedEvals {
		c.readPools(ctx, v, slices.Sorted(maps.Keys(pools)))
	}
	for _, name := range hosts {
		v.holds[name] = workloadHold(s, v, name)
	}
}

// allNamespaces asks a list endpoint for every namespace the token may read.
func allNamespaces(ctx context.Context, filter string) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: api.AllNamespacesNamespace, Filter: filter}).WithContext(ctx)
}

// listJobKeys lists the jobs that filter selects, in every namespace. Nomad
// evaluates the filter on the whole job (nomad/state/paginator Paginator.next
// runs it on the table's object, before the stub is made), so job meta,
// type and node pool can all be filtered on.
func (c *Coordinator) listJobKeys(ctx context.Context, filter string) (map[workload.JobKey]workload.Job, error) {
	stubs, _, err := c.opt.WorkloadsAPI.ListJobs(allNamespaces(ctx, filter))
	if err != nil {
		return nil, fmt.Errorf("list the jobs (filter %s): %w", filter, err)
	}
	out := make(map[workload.JobKey]workload.Job, len(stubs))
	for _, j := range stubs {
		k := workload.JobKey{Namespace: j.Namespace, ID: j.ID}
		out[k] = workload.Job{Key: k, CreateIndex: j.CreateIndex, Stopped: j.Stop}
	}
	return out, nil
}

// readBlockingJobs lists the jobs job_filter selects and, when there is one,
// their allocations on the queued hosts' nodes: per job when there are fewer
// jobs than queued hosts, per node otherwise.
func (c *Coordinator) readBlockingJobs(ctx context.Context, s *snapshot, v *workloadView, hosts []string) {
	jobs, err := c.listJobKeys(ctx, c.opt.Workloads.JobFilter)
	if err != nil {
		v.jobErr = err
		return
	}
	v.blocking = map[workload.JobKey]bool{}
	for k := range jobs {
		v.blocking[k] = true
	}
	if len(v.blocking) == 0 {
		return // no job can block a node: nothing more to read
	}
	if len(v.blocking) < len(hosts) {
		c.readBlockingAllocs(ctx, s, v, hosts)
		return
	}
	for _, h := range hosts {
		id := s.hosts[h].node.ID
		allocs, _, err := c.opt.Nodes.Allocations(id, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			v.allocErr[h] = fmt.Errorf("allocations of node %s: %w", id, err)
			continue
		}
		out := make([]workload.Alloc, 0, len(allocs))
		for _, a := range allocs {
			out = append(out, workload.Alloc{Job: workload.JobKey{Namespace: a.Namespace, ID: a.JobID}, Terminal: allocTerminalStatus(a)})
		}
		v.allocs[h] = out
	}
}

// readBlockingAllocs reads the allocations of each blocking job, when there
// are fewer of them than queued hosts, and files them by node.
func (c *Coordinator) readBlockingAllocs(ctx context.Context, s *snapshot, v *workloadView, hosts []string) {
	byNode := map[string]string{}
	for _, h := range hosts {
		byNode[s.hosts[h].node.ID] = h
		v.allocs[h] = nil
	}
	for _, k := range slices.SortedFunc(maps.Keys(v.blocking), func(a, b workload.JobKey) int { return strings.Compare(a.String(), b.String()) }) {
		q := (&api.QueryOptions{Namespace: k.Namespace}).WithContext(ctx)
		stubs, _, err := c.opt.WorkloadsAPI.JobAllocations(k.ID, q)
		if err != nil {
			err = fmt.Errorf("allocations of job %s: %w", k, err)
			for _, h := range hosts {
				v.allocErr[h] = err
			}
			return
		}
		for _, a := range stubs {
			if h, ok := byNode[a.NodeID]; ok {
				v.allocs[h] = append(v.allocs[h], workload.Alloc{Job: k, Terminal: allocTerminalStatus(&api.Allocation{
					DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus})})
			}
		}
	}
}

// allocTerminalStatus is nomad/structs Allocation.TerminalStatus: desired stop
// or evict, or client status complete, failed or lost.
func allocTerminalStatus(a *api.Allocation) bool {
	switch a.DesiredStatus {
	case api.AllocDesiredStatusStop, api.AllocDesiredStatusEvict:
		return true
	}
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// readPools takes the deployments and blocked evaluations from lists, then
// reads, for each pool with a queued host and only when one of them may hold
// it, the jobs that can place allocations in the pool: its own and those of
// the built-in pool "all" (nomad/structs NodePoolAll). A job's list stub does
// not carry its node pool in the API client's types, so the pool is a filter
// Nomad evaluates.
func (c *Coordinator) readPools(ctx context.Context, v *workloadView, pools []string) {
	deps, evals, err := c.readPoolLists(ctx)
	mayHold := len(evals) > 0 || slices.ContainsFunc(deps, func(d workload.Deployment) bool { return workload.Held(d.Status) })
	set := c.opt.Workloads
	for _, p := range pools {
		if err != nil {
			v.poolErr[p] = err
			continue
		}
		pv := workload.PoolView{Pool: p, Deployments: deps, BlockedEvals: evals, CheckDeployment: set.Deployments, CheckEvals: set.BlockedEvals}
		if mayHold {
			if pv.Jobs, pv.DeploymentJobs, err = c.poolJobs(ctx, p); err != nil {
				v.poolErr[p], err = err, nil
				continue
			}
		}
		v.pools[p] = pv
	}
}

// readPoolLists lists the deployments and the blocked evaluations, as the
// settings ask, side by side: both are read between a slot being freed and
// the next drain, and at the start of a rollout, while every agent writes its
// record, each took tens of milliseconds. The error is the deployments' when
// both fail.
func (c *Coordinator) readPoolLists(ctx context.Context) ([]workload.Deployment, []workload.Eval, error) {
	set, wapi := c.opt.Workloads, c.opt.WorkloadsAPI
	var (
		deps             []workload.Deployment
		evals            []workload.Eval
		depsErr, evalErr error
		wg               sync.WaitGroup
	)
	if set.Deployments {
		wg.Go(func() {
			list, _, err := wapi.ListDeployments(allNamespaces(ctx, ""))
			if err != nil {
				depsErr = fmt.Errorf("list the deployments: %w", err)
				return
			}
			for _, d := range list {
				deps = append(deps, workload.Deployment{ID: d.ID, Job: workload.JobKey{Namespace: d.Namespace, ID: d.JobID},
					JobCreateIndex: d.JobCreateIndex, Status: d.Status, CreateIndex: d.CreateIndex})
			}
		})
	}
	if set.BlockedEvals {
		wg.Go(func() {
			list, _, err := wapi.ListEvaluations(allNamespaces(ctx, `Status == "blocked"`))
			if err != nil {
				evalErr = fmt.Errorf("list the blocked evaluations: %w", err)
				return
			}
			for _, e := range list {
				evals = append(evals, workload.Eval{ID: e.ID, Job: workload.JobKey{Namespace: e.Namespace, ID: e.JobID}})
			}
		})
	}
	wg.Wait()
	if err := cmp.Or(depsErr, evalErr); err != nil {
		return nil, nil, err
	}
	return deps, evals, nil
}

// poolJobs lists the jobs that can place allocations in pool, and those of
// them whose deployments count.
func (c *Coordinator) poolJobs(ctx context.Context, pool string) (map[workload.JobKey]workload.Job, map[workload.JobKey]bool, error) {
	inPool := fmt.Sprintf("NodePool == %q or NodePool == %q", pool, api.NodePoolAll)
	jobs, err := c.listJobKeys(ctx, inPool)
	if err != nil {
		return nil, nil, err
	}
	counted := map[workload.JobKey]bool{}
	if f := c.opt.Workloads.DeploymentFilter; f != "" && c.opt.Workloads.Deployments {
		sel, err := c.listJobKeys(ctx, fmt.Sprintf("(%s) and (%s)", inPool, f))
		if err != nil {
			return nil, nil, err
		}
		for k := range sel {
			counted[k] = true
		}
	} else {
		for k := range jobs {
			counted[k] = true
		}
	}
	return jobs, counted, nil
}

// workloadHold is why one queued host is held by a workload blocker (zero if
// it is not). A read that failed holds: the blocker cannot tell.
func workloadHold(s *snapshot, v *workloadView, host string) phase.WaitReason {
	pool := hostPool(s, s.hosts[host])
	if pool == "" {
		return phase.WaitReason{}
	}
	if v.jobErr != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, v.jobErr.Error())
	}
	if err := v.allocErr[host]; err != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, err.Error())
	}
	if jobs := workload.BlockingJobs(v.allocs[host], v.blocking); len(jobs) > 0 {
		names := make([]string, len(jobs))
		for i, j := range jobs {
			names[i] = j.String()
		}
		what := "job "
		if len(names) > 1 {
			what = "jobs "
		}
		return phase.WaitFor(phase.WaitBlockingJob, what+strings.Join(names, ", "))
	}
	if err := v.poolErr[pool]; err != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, fmt.Sprintf("pool %s: %v", pool, err))
	}
	pv, ok := v.pools[pool]
	if !ok {
		return phase.WaitReason{}
	}
	switch h := workload.PoolHold(pv); h.Kind {
	case workload.ByDeployment:
		return phase.WaitFor(phase.WaitDeployment, h.Detail)
	case workload.ByBlockedEvals:
		return phase.WaitFor(phase.WaitBlockedEvals, h.Detail)
	}
	return phase.WaitReason{}
}

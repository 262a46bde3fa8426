// Package workloadread reads from Nomad what the workload blockers (package
// workload) decide on: the blocking jobs' allocations on a node, and a node
// pool's deployments and blocked evaluations.
//
// What they read is read only for the hosts admission asks about (queued
// hosts with a node, package admission's Needs), and only what the settings
// need: nothing for an idle cluster. Nothing Nomad's node list shows changes
// when a batch job finishes or a deployment succeeds, so a held host is looked
// at again after admission.WorkloadRecheck, not at the next resync.
package workloadread

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocstatus"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/workload"
)

// API is the part of the Nomad API the workload blockers read; Nomad
// implements it over an *api.Client.
type API interface {
	ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error)
	ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error)
	ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error)
	JobAllocations(jobID string, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error)
}

// Nomad is API over a Nomad client.
type Nomad struct{ Client *api.Client }

// ListJobs lists jobs (nomad/job_endpoint.go Job.List).
func (n Nomad) ListJobs(q *api.QueryOptions) ([]*api.JobListStub, *api.QueryMeta, error) {
	return n.Client.Jobs().List(q)
}

// ListDeployments lists deployments (nomad/deployment_endpoint.go Deployment.List).
func (n Nomad) ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	return n.Client.Deployments().List(q)
}

// ListEvaluations lists evaluations (nomad/eval_endpoint.go Eval.List).
func (n Nomad) ListEvaluations(q *api.QueryOptions) ([]*api.Evaluation, *api.QueryMeta, error) {
	return n.Client.Evaluations().List(q)
}

// JobAllocations lists a job's allocations (nomad/job_endpoint.go
// Job.Allocations).
func (n Nomad) JobAllocations(jobID string, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	return n.Client.Jobs().Allocations(jobID, false, q)
}

// view is what a pass read for the workload blockers.
type view struct {
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
	// singletons: the singletons on each host's node read for (singletons
	// = "hold"); singletonErr: a read for it failed.
	singletons   map[string][]workload.TaskGroup
	singletonErr map[string]error
	now          time.Time
}

// NodeAllocs reads a node's allocations; *api.Nodes implements it.
type NodeAllocs interface {
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
}

// Host is a host the blockers decide on: its node and the node's pool;
// Singletons: its group holds singletons (singletons = "hold"), unless an
// approval stands until ApprovedUntil.
type Host struct {
	Name, NodeID, Pool string
	Singletons         bool
	ApprovedUntil      time.Time
}

// Reader reads what the workload blockers decide on.
type Reader struct {
	API      API
	Nodes    NodeAllocs
	Settings workload.Settings
	// Deployments, when it has an answer, gives the deployments instead of
	// a read (deployments.go).
	Deployments *Deployments
	// Now is the pass's clock, for approvals (nil: time.Now).
	Now func() time.Time
}

func (r Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Holds reads what the workload blockers need to decide on hosts, and says
// why each is held (zero: it is not). A read that failed holds: the blockers
// cannot tell.
func (r Reader) Holds(ctx context.Context, hosts []Host) map[string]phase.WaitReason {
	v := &view{allocs: map[string][]workload.Alloc{}, allocErr: map[string]error{},
		pools: map[string]workload.PoolView{}, poolErr: map[string]error{},
		singletons: map[string][]workload.TaskGroup{}, singletonErr: map[string]error{}, now: r.now()}
	pools := map[string]bool{}
	for _, h := range hosts {
		pools[h.Pool] = true
	}
	if r.Settings.JobFilter != "" {
		r.readBlockingJobs(ctx, v, hosts)
	}
	if r.Settings.Deployments || r.Settings.BlockedEvals {
		r.readPools(ctx, v, slices.Sorted(maps.Keys(pools)))
	}
	r.readSingletons(ctx, v, hosts)
	holds := make(map[string]phase.WaitReason, len(hosts))
	for _, h := range hosts {
		holds[h.Name] = v.hold(h)
	}
	return holds
}

// allNamespaces asks a list endpoint for every namespace the token may read.
func allNamespaces(ctx context.Context, filter string) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: api.AllNamespacesNamespace, Filter: filter}).WithContext(ctx)
}

// listJobKeys lists the jobs that filter selects, in every namespace. Nomad
// evaluates the filter on the whole job (nomad/state/paginator Paginator.next
// runs it on the table's object, before the stub is made), so job meta,
// type and node pool can all be filtered on.
func (r Reader) listJobKeys(ctx context.Context, filter string) (map[workload.JobKey]workload.Job, error) {
	stubs, _, err := r.API.ListJobs(allNamespaces(ctx, filter))
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
func (r Reader) readBlockingJobs(ctx context.Context, v *view, hosts []Host) {
	jobs, err := r.listJobKeys(ctx, r.Settings.JobFilter)
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
		r.readBlockingAllocs(ctx, v, hosts)
		return
	}
	for _, host := range hosts {
		h, id := host.Name, host.NodeID
		allocs, _, err := r.Nodes.Allocations(id, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			v.allocErr[h] = fmt.Errorf("allocations of node %s: %w", id, err)
			continue
		}
		out := make([]workload.Alloc, 0, len(allocs))
		for _, a := range allocs {
			out = append(out, workload.Alloc{Job: workload.JobKey{Namespace: a.Namespace, ID: a.JobID}, Terminal: allocstatus.Terminal(a.DesiredStatus, a.ClientStatus)})
		}
		v.allocs[h] = out
	}
}

// readBlockingAllocs reads the allocations of each blocking job, when there
// are fewer of them than queued hosts, and files them by node.
func (r Reader) readBlockingAllocs(ctx context.Context, v *view, hosts []Host) {
	byNode := map[string]string{}
	for _, h := range hosts {
		byNode[h.NodeID] = h.Name
		v.allocs[h.Name] = nil
	}
	for _, k := range slices.SortedFunc(maps.Keys(v.blocking), func(a, b workload.JobKey) int { return strings.Compare(a.String(), b.String()) }) {
		q := (&api.QueryOptions{Namespace: k.Namespace}).WithContext(ctx)
		stubs, _, err := r.API.JobAllocations(k.ID, q)
		if err != nil {
			err = fmt.Errorf("allocations of job %s: %w", k, err)
			for _, h := range hosts {
				v.allocErr[h.Name] = err
			}
			return
		}
		for _, a := range stubs {
			if h, ok := byNode[a.NodeID]; ok {
				v.allocs[h] = append(v.allocs[h], workload.Alloc{Job: k, Terminal: allocstatus.Terminal(a.DesiredStatus, a.ClientStatus)})
			}
		}
	}
}

// readPools takes the deployments and blocked evaluations from lists, then
// reads, for each pool with a queued host and only when one of them may hold
// it (a system job's blocked evaluation holds none: workload.Eval.HoldsPool),
// the jobs that can place allocations in the pool: its own and those of
// the built-in pool "all" (nomad/structs NodePoolAll). A job's list stub does
// not carry its node pool in the API client's types, so the pool is a filter
// Nomad evaluates.
func (r Reader) readPools(ctx context.Context, v *view, pools []string) {
	deps, evals, err := r.readPoolLists(ctx)
	mayHold := slices.ContainsFunc(evals, workload.Eval.HoldsPool) ||
		slices.ContainsFunc(deps, func(d workload.Deployment) bool { return workload.Held(d.Status) })
	set := r.Settings
	for _, p := range pools {
		if err != nil {
			v.poolErr[p] = err
			continue
		}
		pv := workload.PoolView{Pool: p, Deployments: deps, BlockedEvals: evals, CheckDeployment: set.Deployments, CheckEvals: set.BlockedEvals}
		if mayHold {
			if pv.Jobs, pv.DeploymentJobs, err = r.poolJobs(ctx, p); err != nil {
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
func (r Reader) readPoolLists(ctx context.Context) ([]workload.Deployment, []workload.Eval, error) {
	set, wapi := r.Settings, r.API
	var (
		deps             []workload.Deployment
		evals            []workload.Eval
		depsErr, evalErr error
		wg               sync.WaitGroup
	)
	followed, ok := r.Deployments.Latest()
	switch {
	case set.Deployments && ok:
		deps = followed // deployments.go
	case set.Deployments:
		wg.Go(func() {
			list, _, err := wapi.ListDeployments(allNamespaces(ctx, ""))
			if err != nil {
				depsErr = fmt.Errorf("list the deployments: %w", err)
				return
			}
			deps = deploymentsOf(list)
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
				evals = append(evals, workload.Eval{ID: e.ID, Job: workload.JobKey{Namespace: e.Namespace, ID: e.JobID},
					Type: e.Type, NodeID: e.NodeID})
			}
		})
	}
	wg.Wait()
	if err := cmp.Or(depsErr, evalErr); err != nil {
		return nil, nil, err
	}
	return deps, evals, nil
}

// deploymentsOf is what the blockers take of each deployment listed.
func deploymentsOf(list []*api.Deployment) []workload.Deployment {
	out := make([]workload.Deployment, 0, len(list))
	for _, d := range list {
		out = append(out, workload.Deployment{ID: d.ID, Job: workload.JobKey{Namespace: d.Namespace, ID: d.JobID},
			JobCreateIndex: d.JobCreateIndex, Status: d.Status, CreateIndex: d.CreateIndex})
	}
	return out
}

// poolJobs lists the jobs that can place allocations in pool, and those of
// them whose deployments count.
func (r Reader) poolJobs(ctx context.Context, pool string) (map[workload.JobKey]workload.Job, map[workload.JobKey]bool, error) {
	inPool := fmt.Sprintf("NodePool == %q or NodePool == %q", pool, api.NodePoolAll)
	jobs, err := r.listJobKeys(ctx, inPool)
	if err != nil {
		return nil, nil, err
	}
	counted := map[workload.JobKey]bool{}
	if f := r.Settings.DeploymentFilter; f != "" && r.Settings.Deployments {
		sel, err := r.listJobKeys(ctx, fmt.Sprintf("(%s) and (%s)", inPool, f))
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

// hold is why one host is held by a workload blocker (zero if
// it is not). A read that failed holds: the blocker cannot tell.
func (v *view) hold(h Host) phase.WaitReason {
	host, pool := h.Name, h.Pool
	if pool == "" {
		return phase.WaitReason{}
	}
	if v.jobErr != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, v.jobErr.Error())
	}
	if err := v.allocErr[host]; err != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, err.Error())
	}
	if err := v.singletonErr[host]; err != nil {
		return phase.WaitFor(phase.WaitWorkloadUnknown, err.Error())
	}
	if why := workload.SingletonHold(host, v.singletons[host], h.ApprovedUntil, v.now); why != "" {
		return phase.WaitFor(phase.WaitSingleton, why)
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

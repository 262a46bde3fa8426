package workloadread

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocstatus"
	"github.com/rollboot/rollboot/internal/workload"
)

// readSingletons reads, for each host whose group holds singletons and with no
// approval standing, its node's allocations (with the job version each runs,
// which gives its task group's count), then the allocations of each job with a
// candidate (workload.Candidates), once per job, to see whether another healthy
// instance runs elsewhere.
func (r Reader) readSingletons(ctx context.Context, v *view, hosts []Host) {
	jobs := map[workload.JobKey][]workload.GroupAlloc{}
	jobErr := map[workload.JobKey]error{}
	for _, h := range hosts {
		if !h.Singletons || v.now.Before(h.ApprovedUntil) {
			continue
		}
		allocs, _, err := r.Nodes.Allocations(h.NodeID, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			v.singletonErr[h.Name] = fmt.Errorf("allocations of node %s: %w", h.NodeID, err)
			continue
		}
		onNode := make([]workload.GroupAlloc, 0, len(allocs))
		for _, a := range allocs {
			onNode = append(onNode, groupAlloc(a))
		}
		candidates := workload.Candidates(h.NodeID, onNode)
		for _, g := range candidates {
			if _, ok := jobs[g.Job]; ok || jobErr[g.Job] != nil {
				continue
			}
			q := (&api.QueryOptions{Namespace: g.Job.Namespace}).WithContext(ctx)
			stubs, _, err := r.API.JobAllocations(g.Job.ID, q)
			if err != nil {
				jobErr[g.Job] = fmt.Errorf("allocations of job %s: %w", g.Job, err)
				continue
			}
			list := make([]workload.GroupAlloc, 0, len(stubs))
			for _, a := range stubs {
				list = append(list, stubAlloc(g.Job, a))
			}
			jobs[g.Job] = list
		}
		for _, g := range candidates {
			if err := jobErr[g.Job]; err != nil {
				v.singletonErr[h.Name] = err
			}
		}
		v.singletons[h.Name] = workload.Singletons(h.NodeID, candidates, jobs)
	}
}

// groupAlloc is a node's allocation as the singleton check sees it: its task
// group's count from the job version it runs.
func groupAlloc(a *api.Allocation) workload.GroupAlloc {
	g := workload.GroupAlloc{TaskGroup: workload.TaskGroup{Job: workload.JobKey{Namespace: a.Namespace, ID: a.JobID}, Group: a.TaskGroup},
		NodeID: a.NodeID, Terminal: allocstatus.Terminal(a.DesiredStatus, a.ClientStatus), Healthy: healthy(a.ClientStatus, a.DeploymentStatus)}
	if j := a.Job; j != nil {
		if j.Type != nil {
			g.JobType = *j.Type
		}
		for _, tg := range j.TaskGroups {
			if tg != nil && tg.Name != nil && *tg.Name == a.TaskGroup && tg.Count != nil {
				g.Count = *tg.Count
			}
		}
	}
	return g
}

// stubAlloc is an allocation of job as its list shows it.
func stubAlloc(job workload.JobKey, a *api.AllocationListStub) workload.GroupAlloc {
	return workload.GroupAlloc{TaskGroup: workload.TaskGroup{Job: job, Group: a.TaskGroup}, NodeID: a.NodeID,
		Terminal: allocstatus.Terminal(a.DesiredStatus, a.ClientStatus),
		Healthy:  healthy(a.ClientStatus, a.DeploymentStatus)}
}

// healthy: the allocation runs, and its deployment did not mark it unhealthy
// (nomad/structs AllocDeploymentStatus.IsUnhealthy).
func healthy(clientStatus string, d *api.AllocDeploymentStatus) bool {
	if clientStatus != api.AllocClientStatusRunning {
		return false
	}
	return d == nil || d.Healthy == nil || *d.Healthy
}

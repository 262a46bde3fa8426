package rejoin

import (
	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
)

// NomadAllocs is what the decision sees of a node's allocations, as Nomad
// returns them (nomad/api allocations.go Allocation): each one's job type,
// desired and client status, its deployment health (AllocDeploymentStatus.Healthy,
// nil while the client has not set it), and the first task by name whose state
// says it failed (tasks.go TaskState.Failed).
func NomadAllocs(allocs []*api.Allocation) []Alloc {
	out := make([]Alloc, 0, len(allocs))
	for _, a := range allocs {
		ra := Alloc{Name: a.Name, DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus}
		if a.Job != nil && a.Job.Type != nil {
			ra.JobType = *a.Job.Type
		}
		if a.DeploymentStatus != nil {
			ra.Healthy = a.DeploymentStatus.Healthy
		}
		for task, ts := range a.TaskStates {
			if ts != nil && ts.Failed && (ra.FailedTask == "" || task < ra.FailedTask) {
				ra.FailedTask = task
			}
		}
		out = append(out, ra)
	}
	return out
}

// ConsulChecks is what the decision sees of a node's Consul health checks, as
// Consul returns them (consul/api health.go HealthCheck): each one's name, its
// service's name ("" for a node check) and its status.
func ConsulChecks(checks consulapi.HealthChecks) []Check {
	out := make([]Check, 0, len(checks))
	for _, ch := range checks {
		out = append(out, Check{Name: ch.Name, ServiceName: ch.ServiceName, Status: ch.Status})
	}
	return out
}

package nomadsim

import (
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
)

// Consul service checks of the allocations on a host's node. Nomad's client
// registers each running allocation's services and their checks with the
// host's Consul agent, and deregisters them when the allocation stops
// (client/allocrunner/groupservice_hook.go, command/agent/consul/service_client.go
// RegisterWorkload and RemoveWorkload); the agent syncs them to the catalog,
// where /v1/health/node/<node> lists them beside the node's own checks.
//
// The emulator's job model has no service blocks: each task group of a service
// or system job registers one service named "<job>-<group>" (Nomad's default
// service name for a group, structs.Service Canonicalize "${JOB}-${TASKGROUP}")
// with one check named as Nomad names an unnamed check ("service: \"<name>\"
// check", structs.ServiceCheck Canonicalize). The check passes while the
// allocation's task runs, the group's checks do not fail
// (GroupSpec.FailHealthChecks) and the test did not make it fail
// (SetServiceCheckFailing); otherwise it is critical.

// serviceChecksLocked are the checks of the services of the allocations running
// on h's node, and the highest ModifyIndex among the node's allocations (0:
// none), which moves whenever one of these checks may have changed.
func (s *Sim) serviceChecksLocked(h *Host) (consulapi.HealthChecks, uint64) {
	if h.NodeID == "" {
		return nil, 0
	}
	var out consulapi.HealthChecks
	var idx uint64
	for _, id := range s.cluster.allocOrder {
		sa := s.cluster.allocs[id]
		a := sa.a
		if a.NodeID != h.NodeID {
			continue
		}
		idx = max(idx, a.ModifyIndex)
		typ := *a.Job.Type
		if (typ != api.JobTypeService && typ != api.JobTypeSystem) || a.DesiredStatus != api.AllocDesiredStatusRun ||
			(a.ClientStatus != api.AllocClientStatusRunning && !sa.taskDead) {
			continue
		}
		name := a.JobID + "-" + a.TaskGroup
		status, output := consulapi.HealthPassing, "HTTP GET: 200 OK"
		if g := sa.job.group(a.TaskGroup); sa.taskDead || sa.job.checksFailingOn[h.NodeID] || (g != nil && g.FailHealthChecks) {
			status, output = consulapi.HealthCritical, "connection refused"
		}
		out = append(out, &consulapi.HealthCheck{
			Node: h.Name, CheckID: "_nomad-check-" + a.ID, Name: `service: "` + name + `" check`,
			Status: status, Output: output, Type: "http",
			ServiceID: "_nomad-task-" + a.ID + "-group-" + a.TaskGroup + "-" + name, ServiceName: name,
			ServiceTags: []string{}, Namespace: "default",
			CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		})
	}
	return out, idx
}

// SetServiceCheckFailing makes the service checks of job's allocations on
// host's node fail (critical) or pass again, from now on and for the
// allocations placed there later, as a service that stops answering on that
// host. The allocations' health, set once by their client
// (client/allocrunner/health_hook.go), stays as it was. The check's status lives
// in Consul: the change moves Consul's index (blocking queries on the node's
// checks wake), not Nomad's.
func (s *Sim) SetServiceCheckFailing(host, job string, failing bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok || h.NodeID == "" {
		return fmt.Errorf("host %q has no Nomad client", host)
	}
	var j *simJob
	for _, k := range s.cluster.jobOrder {
		if k.id == job {
			j = s.cluster.jobs[k]
		}
	}
	if j == nil {
		return fmt.Errorf("no job %q", job)
	}
	if j.checksFailingOn == nil {
		j.checksFailingOn = map[string]bool{}
	}
	j.checksFailingOn[h.NodeID] = failing
	s.consul.ChecksChanged()
	return nil
}

package nomadsim

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// registerJobRoutes serves the job endpoints the emulator models.
func (s *Sim) registerJobRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/job/", methods(s.handleJobSpecific, http.MethodGet, http.MethodDelete))
	s.registerWorkloadRoutes(mux)  // workloads_http.go
	s.registerJobParseRoute(mux)   // jobparse.go
	s.registerNamespaceRoutes(mux) // jobregister.go
}

func (s *Sim) handleJobSpecific(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/job/")
	if rest != "" && !strings.Contains(rest, "/") {
		// GET /v1/job/:id here, DELETE in jobregister.go.
		if r.Method == http.MethodDelete {
			s.handleJobDeregister(w, r, rest)
		} else {
			s.handleJobRead(w, r, rest)
		}
		return
	}
	id, ok := strings.CutSuffix(rest, "/allocations")
	if !ok || id == "" || strings.Contains(id, "/") || r.Method != http.MethodGet {
		simhttp.WriteError(w, http.StatusNotFound, "Invalid URL")
		return
	}
	s.handleJobAllocs(w, r, id)
}

// handleJobRead answers GET /v1/job/:id (nomad/job_endpoint.go Job.GetJob):
// read-job in the request's namespace (403 otherwise), the job as registered
// with its ModifyIndex as index; a job that does not exist is 404 "job not
// found" (command/agent/job_endpoint.go jobQuery) at the jobs table's index.
func (s *Sim) handleJobRead(w http.ResponseWriter, r *http.Request, id string) {
	ns := requestNamespace(r)
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNamespace(ns, "read-job") }) == nil {
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		j, ok := s.cluster.jobs[jobKey{ns, id}]
		if !ok {
			var index uint64
			for _, j := range s.cluster.jobs {
				index = max(index, *j.job.ModifyIndex)
			}
			return nil, 0, &indexedError{err: simhttp.Code(http.StatusNotFound, "job not found"), index: max(index, 1)}
		}
		return cloneAPI(j.job), *j.job.ModifyIndex, nil
	})
}

// handleJobAllocs answers GET /v1/job/:id/allocations (nomad/job_endpoint.go
// Job.Allocations): read-job in the request's namespace (403 otherwise), the
// allocation stubs of the job in that namespace (state.AllocsByJob), and as index
// the allocs table index (state.Index("allocs")). A blocking query sleeps on the
// watch set of AllocsByJob (watchJobAllocs): it wakes when an allocation of that
// job is written, not on other jobs' allocations; a query whose index is behind
// the allocs table's answers at once, as blockingRPC runs the query before it
// sleeps. A job that does not exist is no error: its list is empty
// (the endpoint does not look the job up), encoded as [] (command/agent
// job_endpoint.go jobAllocations makes an empty slice).
func (s *Sim) handleJobAllocs(w http.ResponseWriter, r *http.Request, id string) {
	ns := requestNamespace(r)
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNamespace(ns, "read-job") }) == nil {
		return
	}
	watch := s.watchJobAllocs(ns, id)
	s.blockingReadWatch(w, r, &watch, func() (any, uint64, error) {
		out := []*api.AllocationListStub{}
		for _, aid := range s.cluster.allocOrder {
			a := s.cluster.allocs[aid].a
			if a.JobID != id || a.Namespace != ns {
				continue
			}
			out = append(out, &api.AllocationListStub{
				ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID,
				NodeName: a.NodeName, JobID: a.JobID, JobType: *a.Job.Type, TaskGroup: a.TaskGroup,
				DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
				ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
				CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
				TaskStates: cloneTaskStates(a.TaskStates),
			})
		}
		return out, max(s.cluster.allocsIndex, 1), nil
	})
}

func cloneTaskStates(m map[string]*api.TaskState) map[string]*api.TaskState {
	if m == nil {
		return nil
	}
	out := make(map[string]*api.TaskState, len(m))
	for k, v := range m {
		out[k] = cloneAPI(v)
	}
	return out
}

// SetTaskRunning makes the task of job's allocation on host's node die
// (running false) or start again (running true), without the host rebooting, as
// when the process is killed. A task that dies and is restarted by the client
// waits in TaskStatePending for its restart delay (client/allocrunner/taskrunner
// task_runner.go shouldRestart), so the allocation's client status is "pending"
// ("No tasks have started", alloc_runner.go getClientStatus) until it runs again.
// The emulator keeps it there until SetTaskRunning(host, job, true).
func (s *Sim) SetTaskRunning(host, job string, running bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cluster.endBatch()
	h, ok := s.hosts[host]
	if !ok || h.NodeID == "" {
		return fmt.Errorf("host %q has no Nomad client", host)
	}
	for _, aid := range s.cluster.allocOrder {
		sa := s.cluster.allocs[aid]
		a := sa.a
		if a.NodeID != h.NodeID || a.JobID != job || allocTerminal(a) {
			continue
		}
		sa.taskDead = !running
		// The task's state as the client reports it (structs.TaskState): the
		// emulator models one task per group (GroupSpec.Task).
		if a.TaskStates == nil {
			a.TaskStates = map[string]*api.TaskState{}
		}
		ts := a.TaskStates[taskName(sa)]
		if ts == nil {
			ts = &api.TaskState{StartedAt: time.Unix(0, a.CreateTime)}
			a.TaskStates[taskName(sa)] = ts
		}
		now := time.Now()
		if running {
			a.ClientStatus, a.ClientDescription = api.AllocClientStatusRunning, "Tasks are running"
			ts.State, ts.StartedAt = "running", now
			ts.Events = append(ts.Events, &api.TaskEvent{Type: "Started", Time: now.UnixNano()})
		} else {
			a.ClientStatus, a.ClientDescription = api.AllocClientStatusPending, "No tasks have started"
			// shouldRestart: TaskStatePending with a "Restarting" event; the
			// restart tracker counts the restart (Restarts, LastRestart).
			ts.State, ts.FinishedAt, ts.Restarts, ts.LastRestart = "pending", now, ts.Restarts+1, now
			ts.Events = append(ts.Events, &api.TaskEvent{Type: "Terminated", Time: now.UnixNano()},
				&api.TaskEvent{Type: "Restarting", Time: now.UnixNano()})
		}
		s.cluster.touchAllocLocked(s, a)
		return nil
	}
	return fmt.Errorf("no live allocation of job %q on host %q", job, host)
}

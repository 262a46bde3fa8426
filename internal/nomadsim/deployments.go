package nomadsim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Deployments. A service job with an update block gets a deployment for each
// version registered (scheduler/reconciler/reconcile_cluster.go: the reconciler
// creates one when the job has an update strategy and places allocations of a
// new version; a registration supersedes the job's active deployment with
// DeploymentStatusDescriptionNewerJob). The deployment tracks the allocations
// placed for it (Allocation.DeploymentID) and:
//   - fails as soon as one of them is unhealthy (nomad/deploymentwatcher/
//     deployment_watcher.go handleAllocUpdate → FailDeployment's status, with
//     DeploymentStatusDescriptionFailedAllocations; no auto_revert is modelled);
//   - succeeds when every group has as many healthy allocations as it wants
//     (reconcile_cluster.go setDeploymentStatusAndUpdates, deploymentComplete).
//
// Allocation health is the client's (migrate.go allocHealthLocked), with the
// group's min_healthy_time and healthy_deadline: the emulator models one
// health check per allocation, which the update and migrate blocks share.

// workloadState holds the deployments and the blocked evaluations.
type workloadState struct {
	deployments map[string]*simDeployment
	depOrder    []string
	// current is each job's active deployment.
	current  map[jobKey]*simDeployment
	depIndex uint64 // index of the "deployment" table

	evals     map[string]*api.Evaluation
	evalOrder []string
	evalIndex uint64 // index of the "evals" table
	blocked   map[jobKey]*blockedJob
	triggers  evalTriggers // what runs a system job's blocked evaluation again (evals.go)
}

func (w *workloadState) init() {
	w.deployments = map[string]*simDeployment{}
	w.current = map[jobKey]*simDeployment{}
	w.evals = map[string]*api.Evaluation{}
	w.blocked = map[jobKey]*blockedJob{}
}

type simDeployment struct {
	d      *api.Deployment
	allocs []*simAlloc
}

func (j *simJob) key() jobKey { return jobKey{j.spec.Namespace, j.spec.ID} }

// registeredLocked starts the deployment of a job version just registered at
// index idx, cancelling the job's active one.
func (w *workloadState) registeredLocked(s *Sim, j *simJob, idx uint64) {
	if old := w.current[j.key()]; old != nil {
		w.setStatusLocked(s, old, api.DeploymentStatusCancelled, "Cancelled due to newer version of job")
	}
	if !j.spec.Update {
		return
	}
	d := &api.Deployment{
		ID: s.uuidLocked(), Namespace: j.spec.Namespace, JobID: j.spec.ID,
		JobVersion: *j.job.Version, JobModifyIndex: *j.job.ModifyIndex, JobSpecModifyIndex: *j.job.JobModifyIndex,
		JobCreateIndex: *j.job.CreateIndex, TaskGroups: map[string]*api.DeploymentState{},
		Status: api.DeploymentStatusRunning, StatusDescription: "Deployment is running",
		CreateIndex: idx, ModifyIndex: idx,
	}
	for _, g := range j.spec.Groups {
		d.TaskGroups[g.Name] = &api.DeploymentState{DesiredTotal: g.Count}
	}
	sd := &simDeployment{d: d}
	w.deployments[d.ID] = sd
	w.depOrder = append(w.depOrder, d.ID)
	w.current[j.key()] = sd
	w.depIndex = idx
}

// placedLocked ties a new allocation to its job's active deployment.
func (w *workloadState) placedLocked(sa *simAlloc) {
	if len(w.current) == 0 {
		return
	}
	sd := w.current[sa.job.key()]
	if sd == nil {
		return
	}
	sa.a.DeploymentID = sd.d.ID
	sd.allocs = append(sd.allocs, sa)
	if st := sd.d.TaskGroups[sa.a.TaskGroup]; st != nil {
		st.PlacedAllocs++
	}
}

// watchDeploymentsLocked is the deployment watcher's round over the active
// deployments.
func (w *workloadState) watchDeploymentsLocked(s *Sim) {
	if len(w.current) == 0 {
		return
	}
	defer s.cluster.endBatch()
	for _, k := range slices.SortedFunc(maps.Keys(w.current), compareJobKeys) {
		sd := w.current[k]
		healthy := map[string]int{}
		unhealthy := map[string]int{}
		for _, sa := range sd.allocs {
			if !allocHasHealth(sa.a) || sa.a.DesiredStatus != api.AllocDesiredStatusRun {
				continue
			}
			if *sa.a.DeploymentStatus.Healthy {
				healthy[sa.a.TaskGroup]++
			} else {
				unhealthy[sa.a.TaskGroup]++
			}
		}
		changed, done := false, true
		for g, st := range sd.d.TaskGroups {
			if st.HealthyAllocs != healthy[g] || st.UnhealthyAllocs != unhealthy[g] {
				st.HealthyAllocs, st.UnhealthyAllocs, changed = healthy[g], unhealthy[g], true
			}
			if healthy[g] < st.DesiredTotal {
				done = false
			}
		}
		switch {
		case len(unhealthy) > 0:
			w.setStatusLocked(s, sd, api.DeploymentStatusFailed, "Failed due to unhealthy allocations")
		case done:
			w.setStatusLocked(s, sd, api.DeploymentStatusSuccessful, "Deployment completed successfully")
		case changed:
			idx := s.cluster.writeLocked(s)
			sd.d.ModifyIndex, w.depIndex = idx, idx
		}
	}
}

// setStatusLocked ends an active deployment with status.
func (w *workloadState) setStatusLocked(s *Sim, sd *simDeployment, status, desc string) {
	idx := s.cluster.writeLocked(s)
	sd.d.Status, sd.d.StatusDescription, sd.d.ModifyIndex = status, desc, idx
	w.depIndex = idx
	delete(w.current, jobKey{sd.d.Namespace, sd.d.JobID})
	s.eventLocked(Event{Type: EventDeployment, Details: map[string]string{
		"deployment_id": sd.d.ID, "job": sd.d.JobID, "namespace": sd.d.Namespace, "status": status}})
}

// EventDeployment: a deployment ended (successful, failed or cancelled).
const EventDeployment = "deployment"

// UpdateJob registers a new version of a job already registered: its meta,
// whether it has an update block, and each group's FailHealthChecks are taken
// from spec, whose type and groups (names and counts; no groups: the job's,
// with passing health checks) must be the job's. Every
// live allocation is replaced by one of the new version (a destructive update,
// as with an update block whose max_parallel covers each group), and a job
// with an update block gets a new deployment. A job that failed its deployment
// is healed so: an update with passing health checks. A stopped job (StopJob)
// runs again.
func (s *Sim) UpdateJob(spec JobSpec) error {
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cluster.endBatch()
	j := s.cluster.jobs[jobKey{spec.Namespace, spec.ID}]
	if j == nil {
		return fmt.Errorf("job %s in namespace %s does not exist", spec.ID, spec.Namespace)
	}
	if spec.Type == "" {
		spec.Type = api.JobTypeService
	}
	if spec.Type != j.spec.Type || len(spec.Groups) != len(j.spec.Groups) && len(spec.Groups) > 0 {
		return fmt.Errorf("job %s: an update may change meta, update and fail_health_checks only", spec.ID)
	}
	if spec.Update && spec.Type != api.JobTypeService {
		return fmt.Errorf("job %s: update (a deployment) is modelled for service jobs only", spec.ID)
	}
	for i, g := range spec.Groups {
		if g.Name != j.spec.Groups[i].Name || (g.Count != 0 && g.Count != j.spec.Groups[i].Count) {
			return fmt.Errorf("job %s: an update may change meta, update and fail_health_checks only", spec.ID)
		}
	}
	idx := s.cluster.writeLocked(s)
	nj := *j.job
	nj.Version = pointerOf(*j.job.Version + 1)
	nj.ModifyIndex, nj.JobModifyIndex = pointerOf(idx), pointerOf(idx)
	nj.Stable = pointerOf(false)
	nj.Stop, nj.Status = pointerOf(false), pointerOf("running") // a stopped job runs again
	nj.Meta = maps.Clone(spec.Meta)
	j.job = &nj
	j.spec.Meta, j.spec.Update = nj.Meta, spec.Update
	for i := range j.spec.Groups {
		j.spec.Groups[i].FailHealthChecks = i < len(spec.Groups) && spec.Groups[i].FailHealthChecks
	}
	now := time.Now()
	for _, id := range s.cluster.allocOrder {
		sa := s.cluster.allocs[id]
		if sa.job == j && !allocTerminal(sa.a) {
			s.cluster.stopAllocLocked(s, sa, now, "alloc not needed due to job update")
		}
	}
	s.cluster.wl.registeredLocked(s, j, idx)
	s.cluster.scheduleLocked(s, now)
	return nil
}

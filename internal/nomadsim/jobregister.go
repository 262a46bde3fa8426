package nomadsim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// Job registration through the API, as `nomad job run` and `nomad job stop
// -purge` use it:
//
//   - PUT/POST /v1/jobs (command/agent/job_endpoint.go JobsRequest → jobUpdate;
//     nomad/job_endpoint.go Job.Register): submit-job in the job's namespace,
//     which must exist (job_endpoint_validators.go: "job %q is in nonexistent
//     namespace %q"). The api.Job becomes the emulator's JobSpec
//     (jobSpecFromAPI) and is scheduled as AddJob schedules it: a system job on
//     every feasible node, a service job's count. Registering a job that exists
//     makes a new version (state_store.go upsertJobImpl bumps Version), as
//     UpdateJob does: its meta may change, not its shape.
//   - GET /v1/job/:id (Job.GetJob): read-job; 404 "job not found".
//   - DELETE /v1/job/:id (Job.Deregister): submit-job, or purge-job with
//     ?purge=true; a job that does not exist is no error. Without purge the
//     job is stopped and stays listed (StopJob); with purge it is also removed
//     (nomad/state/state_store.go DeleteJobTxn), its allocations stopped.
//
// What the emulator keeps of a job (JobSpec): type, node pool, constraints,
// meta, each group's name, count, migrate.max_parallel, its one task's name,
// CPU and memory, and whether its identity block has env = true. A group with
// more than one task is refused. Datacenters, drivers, artifacts, templates and
// the migrate and update durations are not modelled: allocations start after
// Config.MigrateTime and are healthy after the emulator's scaled defaults.

// jobSpecFromAPI is the emulator's model of a submitted job.
func jobSpecFromAPI(job *api.Job, ns string) (JobSpec, error) {
	spec := JobSpec{ID: deref(job.ID), Namespace: ns, Type: deref(job.Type), NodePool: deref(job.NodePool), Meta: maps.Clone(job.Meta)}
	if spec.ID == "" {
		return spec, fmt.Errorf("missing job ID")
	}
	if spec.Type == "" {
		spec.Type = api.JobTypeService
	}
	if spec.NodePool == "" {
		// A job without node_pool goes to the namespace's default pool,
		// "default" (structs.Job.Canonicalize, NodePoolDefault).
		spec.NodePool = "default"
	}
	if spec.NodePool == "all" {
		spec.NodePool = ""
	}
	spec.Constraints = constraintSpecs(job.Constraints)
	spec.Update = spec.Type == api.JobTypeService && job.Update != nil
	for _, tg := range job.TaskGroups {
		g, err := groupSpecFromAPI(tg)
		if err != nil {
			return spec, fmt.Errorf("job %s: %w", spec.ID, err)
		}
		spec.Update = spec.Update || (spec.Type == api.JobTypeService && tg.Update != nil)
		spec.Groups = append(spec.Groups, g)
	}
	if len(spec.Groups) == 0 {
		return spec, fmt.Errorf("job %s: a job needs at least one group", spec.ID)
	}
	return spec, nil
}

func groupSpecFromAPI(tg *api.TaskGroup) (GroupSpec, error) {
	g := GroupSpec{Name: deref(tg.Name), Count: derefOr(tg.Count, 1), Constraints: constraintSpecs(tg.Constraints)}
	if len(tg.Tasks) != 1 {
		return g, fmt.Errorf("group %s has %d tasks: the emulator models one task per group", g.Name, len(tg.Tasks))
	}
	t := tg.Tasks[0]
	g.Task = t.Name
	g.Constraints = append(g.Constraints, constraintSpecs(t.Constraints)...)
	if tg.Migrate != nil {
		g.MigrateMaxParallel = derefOr(tg.Migrate.MaxParallel, 0)
	}
	if t.Resources != nil {
		g.CPU, g.MemoryMB = int64(derefOr(t.Resources.CPU, 0)), int64(derefOr(t.Resources.MemoryMB, 0))
	}
	// The default identity is the one NOMAD_TOKEN carries: Task.Identity as
	// jobspec2 normalizeJob puts it, or unnamed among Identities
	// (structs.WorkloadIdentityDefaultName).
	for _, id := range append([]*api.WorkloadIdentity{t.Identity}, t.Identities...) {
		if id != nil && (id.Name == "" || id.Name == "default") && id.Env {
			g.IdentityEnv = true
		}
	}
	return g, nil
}

func constraintSpecs(cs []*api.Constraint) []ConstraintSpec {
	var out []ConstraintSpec
	for _, c := range cs {
		out = append(out, ConstraintSpec{Attribute: c.LTarget, Operator: c.Operand, Value: c.RTarget})
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func (s *Sim) registerJobWriteRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/jobs", s.handleJobs)
}

// handleJobs is /v1/jobs: GET lists (workloads_http.go), PUT/POST registers.
func (s *Sim) handleJobs(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.handleJobList(w, r)
	case http.MethodPut, http.MethodPost:
		s.handleJobRegister(w, r)
	default:
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
	}
}

func (s *Sim) handleJobRegister(w http.ResponseWriter, r *http.Request) {
	var in api.JobRegisterRequest
	if err := decodeBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if in.Job == nil {
		simhttp.WriteError(w, http.StatusBadRequest, "Job must be specified")
		return
	}
	ns := deref(in.Job.Namespace)
	if ns == "" {
		ns = requestNamespace(r)
	}
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNamespace(ns, "submit-job") }) == nil {
		return
	}
	spec, err := jobSpecFromAPI(in.Job, ns)
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	known := s.namespaceExistsLocked(ns)
	j := s.cluster.jobs[jobKey{ns, spec.ID}]
	s.mu.Unlock()
	if !known {
		simhttp.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("job %q is in nonexistent namespace %q", spec.ID, ns))
		return
	}
	if j == nil {
		err = s.AddJob(spec)
	} else {
		err = s.UpdateJob(spec)
	}
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	idx := deref(s.cluster.jobs[jobKey{ns, spec.ID}].job.JobModifyIndex)
	evalID := s.uuidLocked()
	s.mu.Unlock()
	setIndex(w, idx)
	writeJSON(w, http.StatusOK, &api.JobRegisterResponse{EvalID: evalID, EvalCreateIndex: idx, JobModifyIndex: idx})
}

// handleJobDeregister is DELETE /v1/job/:id[?purge=true] (Job.Deregister).
func (s *Sim) handleJobDeregister(w http.ResponseWriter, r *http.Request, id string) {
	ns := requestNamespace(r)
	purge := r.URL.Query().Get("purge") == "true"
	if s.authorize(w, r, func(t *Token) bool {
		return t.AllowNamespace(ns, "submit-job") || (purge && t.AllowNamespace(ns, "purge-job"))
	}) == nil {
		return
	}
	s.mu.Lock()
	exists := s.cluster.jobs[jobKey{ns, id}] != nil
	s.mu.Unlock()
	var idx uint64
	if exists {
		if err := s.StopJob(ns, id); err != nil {
			simhttp.WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
		s.mu.Lock()
		if purge {
			s.purgeJobLocked(jobKey{ns, id})
		}
		idx = s.cluster.writeLocked(s)
		s.mu.Unlock()
	}
	setIndex(w, idx)
	writeJSON(w, http.StatusOK, &api.JobDeregisterResponse{JobModifyIndex: idx})
}

// purgeJobLocked removes a stopped job (DeleteJobTxn); its allocations, all
// stopped, stay listed as terminal allocations do in the emulator.
func (s *Sim) purgeJobLocked(k jobKey) {
	delete(s.cluster.jobs, k)
	s.cluster.jobOrder = slices.DeleteFunc(s.cluster.jobOrder, func(o jobKey) bool { return o == k })
}

// ---- namespaces ------------------------------------------------------------

// Namespaces, as command/agent/namespace_endpoint.go serves them and
// nomad/namespace_endpoint.go decides them: "default" always exists and cannot
// be deleted; upsert and delete need a management token (UpsertNamespaces,
// DeleteNamespaces: IsManagement); a namespace with jobs that are not stopped,
// live allocations or variables cannot be deleted ("namespace %q has
// non-terminal jobs ...", "... has variables associated with it ...",
// namespaceTerminalJobsLocally, namespaceNoAssociatedVarsLocally). Reads list
// the namespaces the token has any capability in (ListNamespaces:
// AllowNamespace), 404 "Namespace not found" for one that does not exist. The
// emulator checks namespaces only when a job is registered; variables may be
// written in any namespace.

func (s *Sim) registerNamespaceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/namespaces", methods(s.handleNamespaceList, http.MethodGet))
	mux.HandleFunc("/v1/namespace/", s.handleNamespace)
	// NamespaceCreateRequest: an upsert named by its body.
	mux.HandleFunc("/v1/namespace", methods(func(w http.ResponseWriter, r *http.Request) { s.namespaceUpsert(w, r, "") },
		http.MethodPut, http.MethodPost))
}

func (s *Sim) namespaceExistsLocked(ns string) bool {
	_, ok := s.namespaces[ns]
	return ok || ns == "default"
}

func (s *Sim) namespaceListLocked() []*api.Namespace {
	out := []*api.Namespace{{Name: "default", Description: "Default shared namespace"}}
	names := slices.Sorted(maps.Keys(s.namespaces))
	for _, n := range names {
		ns := *s.namespaces[n]
		out = append(out, &ns)
	}
	return out
}

func (t *Token) anyNamespaceCapability(ns string) bool {
	return t.Management || len(t.namespacePolicies(ns)) > 0
}

func (s *Sim) handleNamespaceList(w http.ResponseWriter, r *http.Request) {
	t := s.authorize(w, r, nil)
	if t == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*api.Namespace{}
	for _, ns := range s.namespaceListLocked() {
		if t.anyNamespaceCapability(ns.Name) {
			out = append(out, ns)
		}
	}
	setIndex(w, s.namespaceIndex)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) handleNamespace(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/v1/namespace/")
	if name == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "Missing Namespace Name")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.namespaceGet(w, r, name)
	case http.MethodPut, http.MethodPost:
		s.namespaceUpsert(w, r, name)
	case http.MethodDelete:
		s.namespaceDelete(w, r, name)
	default:
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
	}
}

func (s *Sim) namespaceGet(w http.ResponseWriter, r *http.Request, name string) {
	if s.authorize(w, r, func(t *Token) bool { return t.anyNamespaceCapability(name) }) == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range s.namespaceListLocked() {
		if ns.Name == name {
			setIndex(w, ns.ModifyIndex)
			writeJSON(w, http.StatusOK, ns)
			return
		}
	}
	simhttp.WriteError(w, http.StatusNotFound, "Namespace not found")
}

// validNamespaceName is structs.validNamespaceName.
func validNamespaceName(n string) bool {
	if len(n) == 0 || len(n) > 128 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Sim) namespaceUpsert(w http.ResponseWriter, r *http.Request, name string) {
	var in api.Namespace
	if err := decodeBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if name != "" && in.Name != name {
		simhttp.WriteError(w, http.StatusBadRequest, "Namespace name does not match request path")
		return
	}
	name = in.Name
	if s.authorize(w, r, func(t *Token) bool { return t.Management }) == nil {
		return
	}
	if !validNamespaceName(name) {
		simhttp.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("Invalid namespace %q: invalid name %q", name, name))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bumpLocked()
	ns := &api.Namespace{Name: name, Description: in.Description, Meta: maps.Clone(in.Meta), CreateIndex: idx, ModifyIndex: idx}
	if old := s.namespaces[name]; old != nil {
		ns.CreateIndex = old.CreateIndex
	}
	if name != "default" {
		s.namespaces[name] = ns
	}
	s.namespaceIndex = idx
	setIndex(w, idx)
	w.WriteHeader(http.StatusOK)
}

func (s *Sim) namespaceDelete(w http.ResponseWriter, r *http.Request, name string) {
	if s.authorize(w, r, func(t *Token) bool { return t.Management }) == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "default" {
		simhttp.WriteError(w, http.StatusInternalServerError, "can not delete default namespace")
		return
	}
	if msg := s.namespaceInUseLocked(name); msg != "" {
		simhttp.WriteError(w, http.StatusInternalServerError, msg)
		return
	}
	delete(s.namespaces, name)
	idx := s.bumpLocked()
	s.namespaceIndex = idx
	setIndex(w, idx)
	w.WriteHeader(http.StatusOK)
}

// namespaceInUseLocked is DeleteNamespaces's refusal, or "".
func (s *Sim) namespaceInUseLocked(name string) string {
	for k, j := range s.cluster.jobs {
		if k.ns == name && !jobStopped(j) {
			return fmt.Sprintf("namespace %q has non-terminal jobs in regions: [%s]", name, s.cfg.Region)
		}
	}
	for _, sa := range s.cluster.allocs {
		if sa.a.Namespace == name && !allocClientTerminal(sa.a) {
			return fmt.Sprintf("namespace %q has non-terminal allocations in regions: [%s]", name, s.cfg.Region)
		}
	}
	if s.namespaceHasVariablesLocked(name) {
		return fmt.Sprintf("namespace %q has variables associated with it in regions: [%s]", name, s.cfg.Region)
	}
	return ""
}

func (s *Sim) namespaceHasVariablesLocked(ns string) bool {
	for k := range s.vars.vars {
		if k.ns == ns {
			return true
		}
	}
	return false
}

package nomadsim

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// The list endpoints of jobs, deployments and evaluations. Each follows its
// RPC: the request's namespace, or every namespace the token may read with
// "*" (structs.AllNamespacesSentinel; nomad/acl_endpoint allowedNSes: a token
// allowed none gets an empty list), and a go-bexpr ?filter= evaluated on the
// state store's object before its stub is made (nomad/state/paginator
// Paginator.next), so a job filter sees the whole job (Meta, NodePool, ...).

func (s *Sim) registerWorkloadRoutes(mux *http.ServeMux) {
	s.registerJobWriteRoutes(mux) // GET /v1/jobs lists, PUT and POST register (jobregister.go)
	mux.HandleFunc("/v1/deployments", methods(s.handleDeploymentList, http.MethodGet))
	mux.HandleFunc("/v1/evaluations", methods(s.handleEvalList, http.MethodGet))
}

// listRequest is what a list request asks: its namespace, its filter, and the
// token allowed to make it (nil: the request was answered with an error).
type listRequest struct {
	ns     string
	filter *bexpr.Evaluator
	tok    *Token
	cap    string
}

// startList checks a list request: a namespace other than "*" needs the
// capability there (403 otherwise), and a filter must compile (400, with the
// paginator's message).
func (s *Sim) startList(w http.ResponseWriter, r *http.Request, capability string) (listRequest, bool) {
	lr := listRequest{ns: requestNamespace(r), cap: capability}
	lr.tok = s.authorize(w, r, func(t *Token) bool {
		if lr.ns == "*" {
			return anyNamespaceAllows(t, capability)
		}
		return t.AllowNamespace(lr.ns, capability)
	})
	if lr.tok == nil {
		return lr, false
	}
	if f := r.URL.Query().Get("filter"); f != "" {
		var err error
		if lr.filter, err = bexpr.CreateEvaluator(f); err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, fmt.Sprintf(
				"failed to create result paginator: failed to read filter expression: %v", err))
			return lr, false
		}
	}
	return lr, true
}

// anyNamespaceAllows is the "*" case of acl.ACL.AllowNamespaceOperation
// (acl/acl.go anyNamespaceAllowsOp): the token has the capability in some
// namespace rule, and no deny there.
func anyNamespaceAllows(t *Token, capability string) bool {
	if t.Management {
		return true
	}
	for _, p := range t.Policies {
		for _, np := range p.Namespaces {
			if slices.Contains(expandNamespaceCaps(np), capability) && !slices.Contains(expandNamespaceCaps(np), "deny") {
				return true
			}
		}
	}
	return false
}

// keep reports whether an object of namespace ns belongs in the answer.
func (lr listRequest) keep(ns string, obj any) (bool, error) {
	if lr.ns != "*" && ns != lr.ns {
		return false, nil
	}
	if lr.ns == "*" && !lr.tok.AllowNamespace(ns, lr.cap) {
		return false, nil
	}
	if lr.filter == nil {
		return true, nil
	}
	ok, err := lr.filter.Evaluate(obj)
	if err != nil {
		return false, simhttp.Code(http.StatusBadRequest, "failed to read result page: %v", err)
	}
	return ok, nil
}

// jobListStub is structs.JobListStub as Nomad encodes it: the API client's
// type lacks NodePool.
type jobListStub struct {
	api.JobListStub
	NodePool string
}

// handleJobList answers GET /v1/jobs (nomad/job_endpoint.go Job.List,
// list-jobs): the jobs in ID order within each namespace, Meta only with
// ?meta=true (command/agent/job_endpoint.go jobListRequest, structs.Job.Stub
// with JobStubFields.Meta), as index the jobs table's.
func (s *Sim) handleJobList(w http.ResponseWriter, r *http.Request) {
	lr, ok := s.startList(w, r, "list-jobs")
	if !ok {
		return
	}
	meta, _ := strconv.ParseBool(r.URL.Query().Get("meta"))
	s.blockingRead(w, r, func() (any, uint64, error) {
		out := []*jobListStub{}
		var index uint64
		for _, k := range sortedJobKeys(s.cluster.jobs) {
			j := s.cluster.jobs[k].job
			index = max(index, *j.ModifyIndex)
			keep, err := lr.keep(k.ns, j)
			if err != nil {
				return nil, 0, err
			}
			if !keep {
				continue
			}
			st := &jobListStub{JobListStub: api.JobListStub{
				ID: *j.ID, Name: *j.Name, Namespace: *j.Namespace, Datacenters: j.Datacenters, Type: *j.Type,
				Priority: *j.Priority, Status: *j.Status, CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex,
				JobModifyIndex: *j.JobModifyIndex, Stop: j.Stop != nil && *j.Stop,
			}, NodePool: *j.NodePool}
			if meta {
				st.Meta = j.Meta
			}
			out = append(out, st)
		}
		return out, max(index, 1), nil
	})
}

// sortedJobKeys are the jobs in the state store's order: by namespace, then ID.
func sortedJobKeys(m map[jobKey]*simJob) []jobKey {
	return slices.SortedFunc(maps.Keys(m), compareJobKeys)
}

func compareJobKeys(a, b jobKey) int {
	if c := cmp.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// handleDeploymentList answers GET /v1/deployments (nomad/deployment_endpoint.go
// Deployment.List, read-job): the deployments in creation order, as index the
// deployment table's.
func (s *Sim) handleDeploymentList(w http.ResponseWriter, r *http.Request) {
	lr, ok := s.startList(w, r, "read-job")
	if !ok {
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		wl := &s.cluster.wl
		out := []*api.Deployment{}
		for _, id := range wl.depOrder {
			d := wl.deployments[id].d
			keep, err := lr.keep(d.Namespace, d)
			if err != nil {
				return nil, 0, err
			}
			if keep {
				out = append(out, cloneDeployment(d))
			}
		}
		return out, max(wl.depIndex, 1), nil
	})
}

func cloneDeployment(d *api.Deployment) *api.Deployment {
	c := *d
	c.TaskGroups = make(map[string]*api.DeploymentState, len(d.TaskGroups))
	for g, st := range d.TaskGroups {
		c.TaskGroups[g] = cloneAPI(st)
	}
	return &c
}

// handleEvalList answers GET /v1/evaluations (nomad/eval_endpoint.go Eval.List,
// read-job): the evaluations in creation order, filtered by ?filter= or by the
// legacy ?status= and ?job= (not both: structs.ErrIncompatibleFiltering), as
// index the evals table's.
func (s *Sim) handleEvalList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status, job := q.Get("status"), q.Get("job")
	if q.Get("filter") != "" && (status != "" || job != "") {
		simhttp.WriteError(w, http.StatusBadRequest, "Filter expression cannot be used with other filter parameters")
		return
	}
	lr, ok := s.startList(w, r, "read-job")
	if !ok {
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		wl := &s.cluster.wl
		out := []*api.Evaluation{}
		for _, id := range wl.evalOrder {
			e := wl.evals[id]
			if (status != "" && e.Status != status) || (job != "" && e.JobID != job) {
				continue
			}
			keep, err := lr.keep(e.Namespace, e)
			if err != nil {
				return nil, 0, err
			}
			if keep {
				out = append(out, cloneEval(e))
			}
		}
		return out, max(wl.evalIndex, 1), nil
	})
}

package status

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/store"
)

// Store is the part of *store.Store that Read uses.
type Store interface {
	HostsChecked(ctx context.Context, index uint64, wait time.Duration) ([]store.HostRecord, []store.BadRecord, uint64, error)
	PlansChecked(ctx context.Context) (map[string]store.Plan, []store.BadRecord, error)
	Control(ctx context.Context) (store.Control, error)
	PolicyStore
}

// Nodes is the part of *api.Nodes that Read uses.
type Nodes interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
}

// Source is where Read reads the status from.
type Source struct {
	Store Store
	Nodes Nodes
	Jobs  coordinator.JobsAPI
	// AgentJob is the agents' Nomad job in AgentNamespace ("": agents are not
	// checked), as the coordinator watches it.
	AgentJob       string
	AgentNamespace string
}

// Read reads the status: the host records, plans and control state (an error
// if any cannot be read), then what the coordinator checks before using the
// records: records that cannot be used (they do not decode, do not match their
// path, or name another host's node), control entries and plans that cannot be
// read, and hosts whose agent does not run at now (from the agent job's
// allocations). What Nomad cannot tell is said in AgentCheck; the rest stands.
func Read(ctx context.Context, src Source, now time.Time) (View, error) {
	recs, bad, _, err := src.Store.HostsChecked(ctx, 0, 0)
	if err != nil {
		return View{}, err
	}
	plans, planProblems, err := src.Store.PlansChecked(ctx)
	if err != nil {
		return View{}, err
	}
	ctl, err := src.Store.Control(ctx)
	if err != nil {
		return View{}, err
	}
	v := Build(recs, plans, ctl)
	v.ControlProblems, v.PlanProblems = ctl.Problems, planProblems
	pol := readPolicy(ctx, src.Store)
	v.Policy = &pol
	addNomadChecks(ctx, &v, src, recs, bad, now)
	return v, nil
}

// addNomadChecks checks the records against their nodes and the agents against
// their allocations, as the coordinator does.
func addNomadChecks(ctx context.Context, v *View, src Source, recs []store.HostRecord, bad []store.BadRecord, now time.Time) {
	defer markIgnored(v)
	list, _, err := src.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		v.Ignored = bad
		v.AgentCheck = "cannot check host records against their nodes, nor agents: list nodes: " + err.Error()
		return
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	recs, ignored := coordinator.ValidateRecords(recs, nodes)
	v.Ignored = append(bad, ignored...)
	missing := map[string]string{}
	if job, ns := src.AgentJob, src.AgentNamespace; job != "" {
		allocs, _, err := coordinator.ReadAgentAllocs(ctx, src.Jobs, job, ns, 0, 0)
		switch {
		case err != nil:
			v.AgentCheck = "cannot tell which agents run: " + err.Error()
		case !allocs.Known:
			v.AgentCheck = fmt.Sprintf("job %s has no allocations in namespace %s: agents are not checked", job, ns)
		default:
			missing = coordinator.MissingAgents(recs, nodes, allocs, now)
		}
	}
	for i := range v.Hosts {
		v.Hosts[i].AgentMissing = missing[v.Hosts[i].Host]
	}
}

package status

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/hostcheck"
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
	Jobs  hostcheck.JobsAPI
	// AgentJob is the agents' Nomad job in AgentNamespace ("": agents are not
	// checked), as the coordinator watches it.
	AgentJob       string
	AgentNamespace string
	// Silences: where the silences kept are read (nil: not read).
	Silences SilenceStore
	// Waves: where the waves are read (nil: not read; waves.go).
	Waves WaveStore
	// Halts: where the failure budgets' halt state is read (nil: not read).
	Halts HaltStore
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
	pol := readPolicy(ctx, src.Store)
	nodes, nodesErr := listNodes(ctx, src.Nodes)
	var unbacked []string
	if nodesErr == nil {
		recs, unbacked = leaveOutUnbacked(recs, plans, nodes, nodelessHosts(ctx, src.Store))
	}
	v := Build(recs, plans, ctl)
	v.ControlProblems, v.PlanProblems, v.Unbacked = ctl.Problems, planProblems, unbacked
	v.Policy = &pol
	waitForLeader(&v, pol)
	addNomadChecks(ctx, &v, src, recs, bad, nodes, nodesErr, now)
	if src.Silences != nil {
		readSilences(ctx, &v, src.Silences)
	}
	if src.Waves != nil {
		readWaves(ctx, &v, src.Waves)
	}
	if src.Halts != nil {
		readHalts(ctx, &v, src.Halts)
	}
	return v, nil
}

// waitForLeader says, of each idle host that needs a reboot and waits for
// nothing else, that no coordinator leads to start it: idle alone would read
// as nothing to do.
func waitForLeader(v *View, pol Policy) {
	if pol.Leads() || pol.ReadError != "" {
		return
	}
	for i, h := range v.Hosts {
		if h.Phase == store.PhaseIdle && (h.RebootRequired || h.ManualRequest) && h.Waiting == "" {
			v.Hosts[i].Waiting = "needs a reboot: no coordinator leads to start it (see Coordinator above)"
		}
	}
}

func listNodes(ctx context.Context, n Nodes) (map[string]*api.NodeListStub, error) {
	list, _, err := n.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	return nodes, nil
}

// leaveOutUnbacked leaves out the records of hosts without a Nomad node that
// nothing backs, as the coordinator does (hostcheck.Corroborate): a record
// anyone holding the agent token could have written for a name that is no
// host. Kept are those with a plan (the coordinator took the host in), those
// that say the host runs a server or is a FleetLock client (the coordinator
// checks them against the clusters and the allow-list), and those listed in
// a group's hosts_without_node.
func leaveOutUnbacked(recs []store.HostRecord, plans map[string]store.Plan, nodes map[string]*api.NodeListStub, listed map[string]bool) ([]store.HostRecord, []string) {
	named := map[string]bool{}
	for _, n := range nodes {
		named[n.Name] = true
	}
	var kept []store.HostRecord
	var out []string
	for _, r := range recs {
		_, planned := plans[r.Host]
		if r.NodeID != "" || named[r.Host] || planned || listed[r.Host] || len(r.Servers) > 0 ||
			slices.Contains(r.Roles, store.RoleFleetLock) {
			kept = append(kept, r)
			continue
		}
		out = append(out, r.Host)
	}
	return kept, out
}

// nodelessHosts are the hosts the stored policy lists in its groups'
// hosts_without_node (none when it cannot be read).
func nodelessHosts(ctx context.Context, st PolicyStore) map[string]bool {
	out := map[string]bool{}
	rec, err := st.Policy(ctx)
	if err != nil {
		return out
	}
	pf, err := config.ParsePolicy([]byte(rec.Source), rec.Filename)
	if err != nil {
		return out
	}
	rules, err := config.CompilePolicy(pf)
	if err != nil {
		return out
	}
	for _, g := range rules.Policy().Groups {
		for _, h := range g.HostsWithoutNode {
			out[h] = true
		}
	}
	return out
}

// addNomadChecks checks the records against their nodes and the agents against
// their allocations, as the coordinator does.
func addNomadChecks(ctx context.Context, v *View, src Source, recs []store.HostRecord, bad []store.BadRecord,
	nodes map[string]*api.NodeListStub, nodesErr error, now time.Time) {
	defer markIgnored(v)
	if nodesErr != nil {
		v.Ignored = bad
		v.AgentCheck = "cannot check host records against their nodes, nor agents: list nodes: " + nodesErr.Error()
		return
	}
	recs, ignored := hostcheck.ValidateRecords(recs, nodes)
	v.Ignored = append(bad, ignored...)
	missing := map[string]string{}
	if job, ns := src.AgentJob, src.AgentNamespace; job != "" {
		allocs, _, err := hostcheck.ReadAgentAllocs(ctx, src.Jobs, job, ns, 0, 0)
		switch {
		case err != nil:
			v.AgentCheck = "cannot tell which agents run: " + err.Error()
		case !allocs.Known:
			v.AgentCheck = fmt.Sprintf("job %s has no allocations in namespace %s: agents are not checked", job, ns)
		default:
			missing = hostcheck.MissingAgents(recs, nodes, allocs, now)
		}
	}
	for i := range v.Hosts {
		v.Hosts[i].AgentMissing = missing[v.Hosts[i].Host]
		v.Hosts[i].DrainedItself = drainedItself(nodes[v.Hosts[i].NodeID])
	}
}

// drainedItself is when n's client last drained its node on shutdown: its last
// drain, when Nomad recorded the node's own client as its author
// (phase.NodeView.DrainBySelf).
func drainedItself(n *api.NodeListStub) time.Time {
	if n == nil || n.LastDrain == nil || n.LastDrain.AccessorID != "client:"+n.ID {
		return time.Time{}
	}
	return n.LastDrain.StartedAt
}

package hostcheck

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/store"
)

// DefaultAgentJob is the Nomad job the agents run as, by default.
const DefaultAgentJob = "rollboot"

// JobsAPI is the part of the Nomad jobs API the coordinator uses; *api.Jobs
// implements it.
type JobsAPI interface {
	Allocations(jobID string, allAllocs bool, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error)
}

// ValidateRecords keeps the host records the coordinator may use. A host's
// node is the Nomad node whose name is the host's: a record must name that
// node's ID (one of them, when several nodes share the name), and a record of
// a host without a node must name none. A record under hosts/b naming a's node
// ID would otherwise have a's node drained for b, and a record of a client left
// without its node ID would be granted with no drain at all. The store already
// dropped records whose path does not match their host name. When every record
// may be used, recs itself is returned (clipped).
func ValidateRecords(recs []store.HostRecord, nodes map[string]*api.NodeListStub) ([]store.HostRecord, []store.BadRecord) {
	var ok []store.HostRecord // nil while none was dropped: recs[:i] are all usable
	var ignored []store.BadRecord
	var byName map[string][]string
	for i, r := range recs {
		if byName == nil {
			byName = nodeIDsByName(nodes)
		}
		why := recordProblem(r, nodes, byName[r.Host])
		if why != "" {
			if ok == nil {
				ok = append(make([]store.HostRecord, 0, len(recs)), recs[:i]...)
			}
			ignored = append(ignored, store.BadRecord{Host: r.Host, Err: "record ignored: " + why})
			continue
		}
		if ok != nil {
			ok = append(ok, r)
		}
	}
	if ok == nil {
		// Clipped: an append by the caller must not write into recs' array.
		return slices.Clip(recs), ignored
	}
	return ok, ignored
}

// recordProblem says why r may not be used ("" when it may), given the IDs of
// the nodes named as its host.
func recordProblem(r store.HostRecord, nodes map[string]*api.NodeListStub, own []string) string {
	if err := store.CheckHostName(r.Host); err != nil {
		return err.Error()
	}
	if r.NodeID == "" {
		if len(own) > 0 {
			return fmt.Sprintf("it names no node_id, but the host has Nomad node %s", strings.Join(own, ", "))
		}
		return ""
	}
	switch n := nodes[r.NodeID]; {
	case slices.Contains(own, r.NodeID):
		return ""
	case n == nil:
		return fmt.Sprintf("node_id %s is no Nomad node", r.NodeID)
	default:
		return fmt.Sprintf("node_id %s is the node of %q, not of this host", r.NodeID, n.Name)
	}
}

// nodeIDsByName returns the IDs of the nodes by their name.
func nodeIDsByName(nodes map[string]*api.NodeListStub) map[string][]string {
	out := make(map[string][]string, len(nodes))
	for id, n := range nodes {
		out[n.Name] = append(out[n.Name], id)
	}
	for _, ids := range out {
		sort.Strings(ids)
	}
	return out
}

// AgentStartGrace is how long a newly placed allocation of the agent job may stay
// pending (image pull, first start) before its agent counts as missing.
const AgentStartGrace = 2 * time.Minute

// AgentAllocs is what the agent job's allocations say, by node ID.
type AgentAllocs struct {
	Job string
	// Index is the allocs table index the list was read at: a node changed
	// after it (made eligible again) may not have its allocation placed yet.
	Index uint64
	// Known: the job has allocations at all. Without any (the agents run as
	// systemd services, or the job is not deployed) nothing can be told.
	Known bool
	// ByNode holds, for each node with a live allocation of the job, whether it
	// runs, and its client status.
	ByNode map[string]allocState
}

type allocState struct {
	running bool
	status  string
	created time.Time
	// ran: a task of the allocation ran before (it died and waits for its
	// restart, or failed), as opposed to an allocation that never started.
	ran bool
}

// agentAllocs sums up the job's allocation stubs.
func agentAllocs(job string, index uint64, stubs []*api.AllocationListStub) AgentAllocs {
	a := AgentAllocs{Job: job, Index: index, Known: len(stubs) > 0, ByNode: map[string]allocState{}}
	for _, s := range stubs {
		if s.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		running := s.ClientStatus == api.AllocClientStatusRunning
		if cur, ok := a.ByNode[s.NodeID]; ok && cur.running {
			continue
		}
		switch s.ClientStatus {
		case api.AllocClientStatusComplete, api.AllocClientStatusLost:
			continue // gone: as if none
		}
		st := allocState{running: running, status: s.ClientStatus, created: time.Unix(0, s.CreateTime)}
		for _, ts := range s.TaskStates {
			st.ran = st.ran || ts.Restarts > 0 || !ts.FinishedAt.IsZero()
		}
		a.ByNode[s.NodeID] = st
	}
	return a
}

// MissingAgents returns the hosts whose agent should run and does not, with why.
// A host should have an agent when it published a record (FleetLock-only hosts
// have none) and its node is ready. Its agent is missing when:
//   - the agent job's allocation on the node failed, or its task ran and died
//     and waits for its restart (client status pending, task restarted);
//   - the allocation never started within AgentStartGrace of its placement;
//   - the node is eligible and has no allocation at all (Nomad places a system
//     job's allocation on every eligible node), and the list is newer than the
//     node's last change (the scheduler had its chance to place one).
//
// A node that is ineligible or draining gets no new allocation, so none there is
// no proof. Hosts without a Nomad client are not checked (docs/architecture.md).
func MissingAgents(recs []store.HostRecord, nodes map[string]*api.NodeListStub, allocs AgentAllocs, now time.Time) map[string]string {
	out := map[string]string{}
	if !allocs.Known {
		return out
	}
	for _, r := range recs {
		if r.NodeID == "" || (slices.Contains(r.Roles, store.RoleFleetLock) && r.AgentVersion == "") {
			continue
		}
		n := nodes[r.NodeID]
		if n == nil || n.Status != "ready" {
			continue
		}
		st, ok := allocs.ByNode[r.NodeID]
		switch {
		case ok && st.running:
		case ok && st.status == api.AllocClientStatusFailed:
			out[r.Host] = fmt.Sprintf("agent missing: its allocation of job %s failed", allocs.Job)
		case ok && st.ran:
			out[r.Host] = fmt.Sprintf("agent missing: its task of job %s died and is %s (waiting for its restart)", allocs.Job, st.status)
		case ok && now.Sub(st.created) > AgentStartGrace:
			out[r.Host] = fmt.Sprintf("agent missing: its allocation of job %s is still %s, %s after its placement",
				allocs.Job, st.status, now.Sub(st.created).Round(time.Second))
		case ok:
		case n.SchedulingEligibility == "eligible" && !n.Drain && allocs.Index > n.ModifyIndex:
			out[r.Host] = fmt.Sprintf("agent missing: no allocation of job %s on its node", allocs.Job)
		}
	}
	return out
}

// ReadAgentAllocs reads the agent job's allocations (index > 0: a blocking query).
func ReadAgentAllocs(ctx context.Context, jobs JobsAPI, job, namespace string, index uint64, wait time.Duration) (AgentAllocs, uint64, error) {
	q := (&api.QueryOptions{Namespace: namespace, WaitIndex: index, WaitTime: wait}).WithContext(ctx)
	stubs, meta, err := jobs.Allocations(job, false, q)
	if err != nil {
		return AgentAllocs{}, 0, fmt.Errorf("allocations of job %s: %w", job, err)
	}
	return agentAllocs(job, meta.LastIndex, stubs), meta.LastIndex, nil
}

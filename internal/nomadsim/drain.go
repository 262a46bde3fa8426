package nomadsim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// Node event messages: nomad/node_endpoint.go NodeDrainEvent* and
// NodeEligibilityEvent*, nomad/drainer/drainer.go NodeDrainEventComplete and
// NodeDrainEventDetailDeadlined (written through nomad/drainer_shims.go
// NodesDrainComplete), nomad/heartbeat.go's missed heartbeat.
const (
	nodeDrainEventDrainSet       = "Node drain strategy set"
	nodeDrainEventDrainDisabled  = "Node drain disabled"
	nodeDrainEventDrainUpdated   = "Node drain strategy updated"
	nodeDrainEventComplete       = "Node drain complete"
	nodeDrainEventDetailDeadline = "deadline_reached"
	nodeEligibilityEligible      = "Node marked as eligible for scheduling"
	nodeEligibilityIneligible    = "Node marked as ineligible for scheduling"
	nodeHeartbeatMissed          = "Node heartbeat missed"
)

// nodeUpdateResponse is structs.NodeDrainUpdateResponse /
// NodeEligibilityUpdateResponse: the eval fields plus the embedded WriteMeta.
type nodeUpdateResponse struct {
	NodeModifyIndex uint64
	EvalIDs         []string
	EvalCreateIndex uint64
	Index           uint64
}

func writeUpdateResponse(w http.ResponseWriter, resp nodeUpdateResponse) {
	// A write's X-Nomad-Index is the write index, 0 when nothing was written
	// (command/agent/http.go setIndex), which setIndex in http.go would raise to 1.
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(resp.Index, 10))
	writeJSON(w, http.StatusOK, resp)
}

// handleNodeDrain answers PUT|POST /v1/node/:id/drain (command/agent/node_endpoint.go
// nodeToggleDrain → nomad/node_endpoint.go Node.UpdateDrain →
// nomad/state/state_store.go updateNodeDrainImpl). The node ID comes from the path.
func (s *Sim) handleNodeDrain(w http.ResponseWriter, r *http.Request, id string) {
	// checkNodeDrainAuth: node:write (or the node's own identity, not modelled).
	t := s.authorize(w, r, func(t *Token) bool { return t.AllowNode(true) })
	if t == nil {
		return
	}
	var req api.NodeUpdateDrainRequest
	if err := decodeBody(r, &req); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	resp, err := s.updateDrain(t, id, &req)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeUpdateResponse(w, resp)
}

// updateDrain applies a drain update (Node.UpdateDrain) by the holder of t.
func (s *Sim) updateDrain(t *Token, id string, req *api.NodeUpdateDrainRequest) (nodeUpdateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateDrainLocked(t.accessorIdentity(), id, req)
}

// updateDrainLocked applies a drain update by accessor, the identity Nomad
// records as LastDrain.AccessorID (UpdateDrain: args.UpdatedBy from
// AuthenticatedIdentity.String, "token:<accessor>" or "client:<node ID>").
func (s *Sim) updateDrainLocked(accessor, id string, req *api.NodeUpdateDrainRequest) (nodeUpdateResponse, error) {
	if id == "" {
		return nodeUpdateResponse{}, errors.New("missing node ID for drain update")
	}
	sn, ok := s.cluster.nodes[id]
	if !ok {
		return nodeUpdateResponse{}, errors.New("node not found")
	}
	n := sn.node
	now := time.Now()
	prev := n.DrainStrategy
	spec := req.DrainSpec

	var msg, simEvent string
	switch {
	case prev == nil && spec != nil:
		msg, simEvent = nodeDrainEventDrainSet, EventDrainStart
	case prev != nil && spec != nil:
		msg, simEvent = nodeDrainEventDrainUpdated, EventDrainUpdate
	case prev != nil && spec == nil:
		msg, simEvent = nodeDrainEventDrainDisabled, EventDrainCancel
	}

	idx := s.bumpLocked()
	becameEligible := false
	if spec != nil {
		ds := &api.DrainStrategy{DrainSpec: *spec, StartedAt: now}
		// Node.UpdateDrain: only a positive deadline sets ForceDeadline; a negative
		// one means "force now" (structs.DrainStrategy.DeadlineTime returns the
		// zero time), 0 means no deadline.
		if spec.Deadline > 0 {
			ds.ForceDeadline = now.Add(spec.Deadline)
		}
		if prev != nil {
			ds.StartedAt = prev.StartedAt // kept while already draining
		}
		n.DrainStrategy = ds
		n.SchedulingEligibility = api.NodeSchedulingIneligible
	} else {
		n.DrainStrategy = nil
		if req.MarkEligible && n.SchedulingEligibility != api.NodeSchedulingEligible {
			n.SchedulingEligibility = api.NodeSchedulingEligible
			becameEligible = true
		}
	}

	// LastDrain (updateNodeDrainImpl): untouched when neither the old nor the new
	// state is a drain. Times have a one-second resolution (UpdatedAt is unix s).
	updateTime := time.Unix(now.Unix(), 0)
	if prev != nil || spec != nil {
		switch {
		case prev == nil || n.LastDrain == nil:
			n.LastDrain = &api.DrainMetadata{
				StartedAt:  updateTime,
				UpdatedAt:  updateTime,
				Status:     api.DrainStatusDraining,
				AccessorID: accessor,
				Meta:       req.Meta,
			}
		default:
			n.LastDrain.UpdatedAt = updateTime
			if req.Meta != nil {
				n.LastDrain.Meta = req.Meta
			}
			if accessor != "" {
				n.LastDrain.AccessorID = accessor
			}
			if spec == nil {
				n.LastDrain.Status = api.DrainStatusCanceled
			}
		}
	}
	if msg != "" {
		addNodeEvent(n, "Drain", msg, nil, idx)
	}
	s.cluster.touchNodeLocked(n, idx, eventNodeDrain)

	resp := nodeUpdateResponse{NodeModifyIndex: idx, Index: idx}
	if becameEligible {
		resp.EvalIDs, resp.EvalCreateIndex = s.cluster.createNodeEvalsLocked(s, id, idx)
	}
	if simEvent != "" {
		d := map[string]string{"accessor": accessor}
		if spec != nil {
			d["deadline"] = spec.Deadline.String()
			d["ignore_system_jobs"] = strconv.FormatBool(spec.IgnoreSystemJobs)
			for k, v := range req.Meta {
				d["meta."+k] = v // who drains (package invariants tells rollboot's drains from others')
			}
		} else {
			d["mark_eligible"] = strconv.FormatBool(req.MarkEligible)
		}
		s.eventLocked(Event{Type: simEvent, Host: sn.host.Name, NodeID: id, Details: d})
	}
	if becameEligible {
		s.eventLocked(Event{Type: EventEligibility, Host: sn.host.Name, NodeID: id,
			Details: map[string]string{"eligibility": api.NodeSchedulingEligible}})
	}
	if spec != nil || becameEligible {
		// The drainer and scheduler react at once (a node with nothing to move
		// completes its drain immediately: nomad/drainer/watch_nodes.go).
		s.after(0, func() { s.cluster.tickLocked(s, time.Now()) })
	}
	return resp, nil
}

// createNodeEvalsLocked is Node.createNodeEvals: one evaluation per job with
// allocations on the node and per system job.
func (c *clusterState) createNodeEvalsLocked(s *Sim, nodeID string, idx uint64) ([]string, uint64) {
	jobs := map[jobKey]bool{}
	for _, a := range c.allocs {
		if a.a.NodeID == nodeID {
			jobs[jobKey{a.a.Namespace, a.a.JobID}] = true
		}
	}
	var ids []string
	for _, k := range c.jobOrder {
		if jobs[k] || c.jobs[k].spec.Type == api.JobTypeSystem {
			ids = append(ids, s.uuidLocked())
		}
	}
	if len(ids) == 0 {
		return nil, 0
	}
	return ids, idx
}

// handleNodeEligibility answers PUT|POST /v1/node/:id/eligibility
// (nodeToggleEligibility → Node.UpdateEligibility). Errors are plain RPC errors,
// hence 500.
func (s *Sim) handleNodeEligibility(w http.ResponseWriter, r *http.Request, id string) {
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(true) }) == nil {
		return
	}
	var req api.NodeUpdateEligibilityRequest
	if err := decodeBody(r, &req); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	resp, err := s.updateEligibility(id, req.Eligibility)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeUpdateResponse(w, resp)
}

// updateEligibility applies an eligibility update (Node.UpdateEligibility).
func (s *Sim) updateEligibility(id, eligibility string) (nodeUpdateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return nodeUpdateResponse{}, errors.New("missing node ID for setting scheduling eligibility")
	}
	switch eligibility {
	case api.NodeSchedulingEligible, api.NodeSchedulingIneligible:
	default:
		return nodeUpdateResponse{}, fmt.Errorf("invalid scheduling eligibility %q", eligibility)
	}
	sn, ok := s.cluster.nodes[id]
	if !ok {
		return nodeUpdateResponse{}, errors.New("node not found")
	}
	n := sn.node
	if n.DrainStrategy != nil && eligibility == api.NodeSchedulingEligible {
		return nodeUpdateResponse{}, errors.New("can not set node's scheduling eligibility to eligible while it is draining")
	}
	if n.SchedulingEligibility == eligibility {
		return nodeUpdateResponse{}, nil // nothing to do: Index 0
	}
	idx := s.bumpLocked()
	msg := nodeEligibilityIneligible
	if eligibility == api.NodeSchedulingEligible {
		msg = nodeEligibilityEligible
	}
	n.SchedulingEligibility = eligibility
	addNodeEvent(n, "Cluster", msg, nil, idx)
	s.cluster.touchNodeLocked(n, idx, eventNodeEligibility) // the write's kind: the stream labels it by version
	resp := nodeUpdateResponse{NodeModifyIndex: idx, Index: idx}
	if eligibility == api.NodeSchedulingEligible {
		resp.EvalIDs, resp.EvalCreateIndex = s.cluster.createNodeEvalsLocked(s, id, idx)
		s.after(0, func() { s.cluster.tickLocked(s, time.Now()) })
	}
	s.eventLocked(Event{Type: EventEligibility, Host: sn.host.Name, NodeID: id,
		Details: map[string]string{"eligibility": eligibility}})
	return resp, nil
}

// deadlineTime is structs.DrainStrategy.DeadlineTime: a negative deadline forces the
// drain now (zero time), 0 is no deadline, otherwise ForceDeadline.
func deadlineTime(d *api.DrainStrategy) (infinite bool, deadline time.Time) {
	switch {
	case d.Deadline < 0:
		return false, time.Time{}
	case d.Deadline == 0:
		return true, time.Time{}
	default:
		return false, d.ForceDeadline
	}
}

// drainLocked is the server's drainer (nomad/drainer): it handles deadlines, marks
// service allocations for migration within each group's migrate.max_parallel, and
// completes drains. It follows Nomad 1.10.3 and later (see drainGroupLocked).
func (c *clusterState) drainLocked(s *Sim, now time.Time) {
	defer c.endBatch()
	c.drainRound++
	var draining []*simNode
	for _, sn := range c.sortedNodesLocked(s) {
		if sn.node.DrainStrategy != nil {
			draining = append(draining, sn)
		}
	}
	if len(draining) == 0 {
		return
	}

	// Deadlines (drainer.go handleDeadlinedNodes): every remaining allocation is
	// marked for migration (system ones too unless IgnoreSystemJobs), then the
	// drain completes with deadline_reached.
	stillDraining := map[string]bool{}
	for _, sn := range draining {
		ds := sn.node.DrainStrategy
		infinite, deadline := deadlineTime(ds)
		if infinite || now.Before(deadline) {
			stillDraining[sn.node.ID] = true
			continue
		}
		for _, id := range c.allocOrder {
			sa := c.allocs[id]
			a := sa.a
			if a.NodeID != sn.node.ID || allocTerminal(a) || allocShouldMigrate(a) {
				continue
			}
			if *a.Job.Type == api.JobTypeSystem && ds.IgnoreSystemJobs {
				continue
			}
			c.markMigrateLocked(s, sa)
		}
		c.completeDrainLocked(s, sn, now, true)
	}

	// Service groups (drainer/watch_jobs.go watch → handleJob → handleTaskGroup).
	// Batch allocations are never migrated early; system jobs are skipped by the
	// job watcher and handled at the end of the drain.
	for _, key := range c.jobOrder {
		j := c.jobs[key]
		if j.spec.Type != api.JobTypeService {
			continue
		}
		for _, g := range j.spec.Groups {
			c.drainGroupLocked(s, j, g, stillDraining)
		}
	}

	// Completion (drainer/draining_node.go IsDone): every allocation that is not a
	// system job's is client-terminal. Then the remaining system allocations are
	// stopped unless IgnoreSystemJobs, and the drain completes.
	for _, sn := range draining {
		if !stillDraining[sn.node.ID] {
			continue
		}
		done := true
		var system []*simAlloc
		for _, id := range c.allocOrder {
			sa := c.allocs[id]
			a := sa.a
			if a.NodeID != sn.node.ID {
				continue
			}
			if *a.Job.Type == api.JobTypeSystem {
				if !allocTerminal(a) && !allocShouldMigrate(a) {
					system = append(system, sa)
				}
				continue
			}
			if !allocClientTerminal(a) {
				done = false
				break
			}
		}
		if !done {
			continue
		}
		if !sn.node.DrainStrategy.IgnoreSystemJobs {
			for _, sa := range system {
				c.markMigrateLocked(s, sa)
			}
		}
		c.completeDrainLocked(s, sn, now, false)
	}
}

// drainGroupLocked is handleTaskGroup for one service group, as in Nomad 1.10.3 and
// later (PR #26175, backported to 1.10.3; first in 1.11.0):
//   - healthy counts the group's allocations, on every node, that are not terminal
//     (desired stop/evict or client-terminal), have their health set, true or false
//     (AllocDeploymentStatus.HasHealth), and are not already marked for migration.
//     Before 1.10.3 a marked allocation still counted until the scheduler stopped
//     it, so a second node drained meanwhile could migrate max_parallel more;
//   - drainable are the allocations on draining nodes that are not client-terminal
//     and not yet marked;
//   - min(drainable, healthy - (count - max_parallel)) of them are marked, in
//     order. So across all draining nodes at most max_parallel allocations of a
//     group are marked and not yet replaced by a healthy one.
func (c *clusterState) drainGroupLocked(s *Sim, j *simJob, g GroupSpec, draining map[string]bool) {
	healthy := 0
	var drainable []*simAlloc
	for _, id := range c.allocOrder {
		sa := c.allocs[id]
		a := sa.a
		if a.JobID != j.spec.ID || a.Namespace != j.spec.Namespace || a.TaskGroup != g.Name {
			continue
		}
		if !allocTerminal(a) && allocHasHealth(a) && !allocShouldMigrate(a) {
			healthy++
		}
		if !draining[a.NodeID] || allocClientTerminal(a) || allocShouldMigrate(a) {
			continue
		}
		drainable = append(drainable, sa)
	}
	numToDrain := min(len(drainable), healthy-(g.Count-g.MigrateMaxParallel))
	for i := 0; i < numToDrain; i++ {
		c.markMigrateLocked(s, drainable[i])
	}
}

// markMigrateLocked sets DesiredTransition.Migrate (drainer.go drainAllocs →
// Alloc.UpdateDesiredTransition, committed with an evaluation for the job); the
// scheduler stops and replaces it when it processes that evaluation, in a later
// round (scheduleLocked).
func (c *clusterState) markMigrateLocked(s *Sim, sa *simAlloc) {
	sa.a.DesiredTransition.Migrate = pointerOf(true)
	sa.markRound = c.drainRound
	c.touchAllocLocked(s, sa.a)
	c.allocEventLocked(s, EventAllocMigrate, sa.a, nil)
}

// completeDrainLocked is the drainer's BatchNodeUpdateDrainRequest with an empty
// update (drainer_shims.go NodesDrainComplete): DrainStrategy nil, the node stays
// ineligible, LastDrain complete with a new UpdatedAt, event "Node drain complete"
// (with deadline_reached=true when the deadline forced it).
func (c *clusterState) completeDrainLocked(s *Sim, sn *simNode, now time.Time, deadlined bool) {
	idx := c.writeLocked(s)
	n := sn.node
	n.DrainStrategy = nil
	if n.LastDrain != nil {
		n.LastDrain.Status = api.DrainStatusComplete
		n.LastDrain.UpdatedAt = time.Unix(now.Unix(), 0)
	}
	var details map[string]string
	if deadlined {
		details = map[string]string{nodeDrainEventDetailDeadline: "true"}
	}
	addNodeEvent(n, "Drain", nodeDrainEventComplete, details, idx)
	c.touchNodeLocked(n, idx, eventNodeDrain)
	s.eventLocked(Event{Type: EventDrainComplete, Host: sn.host.Name, NodeID: n.ID,
		Details: map[string]string{"deadline_reached": strconv.FormatBool(deadlined)}})
}

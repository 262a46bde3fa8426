// Package heartbeatread reads the heartbeat indexes of nodes (their last
// missed heartbeat, re-registration, eligibility change and completed drain,
// from their events) for the coordinator's pass, keeping what a read found by
// node while the node list shows the same ModifyIndex.
package heartbeatread

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
)

// A node's events change only with a write to the node, which gives it a new
// ModifyIndex (nomad/state/state_store.go upsertNodeEvents and
// updateNodeStatusTxn set it with the events they add), so what a read found
// holds while the node list shows the same ModifyIndex: the node is read
// again only when it changed (byindex.Cache).

// Indexes is what a read of a node's events found.
type Indexes struct {
	Reregistered, Missed uint64
	// Eligibility and DrainDone: the indexes of the node's last eligibility
	// event (either way) and last "Node drain complete" event.
	Eligibility, DrainDone uint64
}

// Nodes reads a node in full; *api.Nodes implements it.
type Nodes interface {
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
}

// Read puts the heartbeat indexes of each node of views into it: as kept at
// the node's ModifyIndex, or as the node follower saw the node at that
// ModifyIndex in full (streamed: the node event stream carries the whole
// node, its events included), else read with nodes, at most parallelism side
// by side, and found in its events (Of). It returns the error of each read
// that failed, by the position of its node. What is kept then is what this
// call found, and nothing else.
func Read(ctx context.Context, nodes Nodes, views []*phase.NodeView, kept, streamed *byindex.Cache[Indexes],
	parallelism int) []error {
	found := make([]Indexes, len(views))
	errs := make([]error, len(views))
	index := make([]*uint64, len(views)) // the ModifyIndex of each node read
	var todo []int
	for i, v := range views {
		if e, ok := kept.Get(v.ID, v.ModifyIndex); ok {
			found[i] = e
			continue
		}
		if e, ok := streamed.Get(v.ID, v.ModifyIndex); ok {
			found[i], index[i] = e, &views[i].ModifyIndex // kept below, as if read
			continue
		}
		todo = append(todo, i)
	}
	parallel.Each(len(todo), parallelism, nil, func(k int) {
		i := todo[k]
		n, _, err := nodes.Info(views[i].ID, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			errs[i] = fmt.Errorf("read node %s: %w", views[i].ID, err)
			return
		}
		found[i], index[i] = Of(n), &n.ModifyIndex
	})
	used := make(map[string]bool, len(views))
	for i, v := range views {
		if errs[i] != nil {
			continue
		}
		if index[i] != nil {
			kept.Put(v.ID, *index[i], found[i])
		}
		used[v.ID] = true
		e := found[i]
		v.ReregisteredIndex = max(v.ReregisteredIndex, e.Reregistered)
		v.MissedHeartbeatIndex = max(v.MissedHeartbeatIndex, e.Missed)
		v.EligibilityIndex = max(v.EligibilityIndex, e.Eligibility)
		v.DrainDoneIndex = max(v.DrainDoneIndex, e.DrainDone)
	}
	kept.Retain(func(id string) bool { return used[id] })
	return errs
}

// Node event messages that tell a node missed heartbeats or came back from it.
const (
	// nomad/heartbeat.go NodeHeartbeatEventMissed: the node went down or
	// disconnected.
	EventHeartbeatMissed = "Node heartbeat missed"
	// nomad/node_endpoint.go NodeHeartbeatEventReregistered: a down node
	// heartbeats again (Nomad ≥ 1.5 keeps the status at registration).
	EventReregisteredByHeartbeat = "Node reregistered by heartbeat"
	// nomad/state/state_store.go NodeRegisterEventReregistered: a down node
	// registered with a new status (before Nomad 1.5).
	EventReregistered = "Node re-registered"
	// nomad/node_endpoint.go NodeEligibilityEventEligible and
	// NodeEligibilityEventIneligible: someone changed the node's eligibility.
	EventMarkedEligible   = "Node marked as eligible for scheduling"
	EventMarkedIneligible = "Node marked as ineligible for scheduling"
	// nomad/drainer/drainer.go NodeDrainEventComplete.
	EventDrainComplete = "Node drain complete"
)

// Of returns the node's last re-registration, missed heartbeat, eligibility
// change and completed drain indexes, from its events.
func Of(n *api.Node) Indexes {
	var e Indexes
	for _, ev := range n.Events {
		switch ev.Message {
		case EventReregistered, EventReregisteredByHeartbeat:
			e.Reregistered = max(e.Reregistered, ev.CreateIndex)
		case EventHeartbeatMissed:
			e.Missed = max(e.Missed, ev.CreateIndex)
		case EventMarkedEligible, EventMarkedIneligible:
			e.Eligibility = max(e.Eligibility, ev.CreateIndex)
		case EventDrainComplete:
			e.DrainDone = max(e.DrainDone, ev.CreateIndex)
		}
	}
	return e
}

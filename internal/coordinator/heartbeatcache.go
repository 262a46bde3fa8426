package coordinator

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
)

// The heartbeat indexes of a node (its last missed heartbeat and last
// re-registration, from its events) are read while its host should be
// rebooting: at every pass, for every host drained, rebooting or stuck. A
// node's events change only with a write to the node, which gives it a new
// ModifyIndex (nomad/state/state_store.go upsertNodeEvents and
// updateNodeStatusTxn set it with the events they add), so what a read found
// holds while the node list shows the same ModifyIndex: the node is read again
// only when it changed (perIndex). What is kept is that of the nodes the last
// pass asked for, and no other.

// heartbeatIndexes is what a read of a node's events found (kept in
// Coordinator.heartbeats, a perIndex, for the nodes the last pass asked for).
type heartbeatIndexes struct {
	reregistered, missed uint64
	// eligibility and drainDone: the indexes of the node's last eligibility
	// event (either way) and last "Node drain complete" event.
	eligibility, drainDone uint64
}

// heartbeatIndexesOf returns the node's last re-registration and missed
// heartbeat indexes from its events.
func heartbeatIndexesOf(n *api.Node) heartbeatIndexes {
	var e heartbeatIndexes
	for _, ev := range n.Events {
		switch ev.Message {
		case eventReregistered, eventReregisteredByHeartbeat:
			e.reregistered = max(e.reregistered, ev.CreateIndex)
		case eventHeartbeatMissed:
			e.missed = max(e.missed, ev.CreateIndex)
		case eventMarkedEligible, eventMarkedIneligible:
			e.eligibility = max(e.eligibility, ev.CreateIndex)
		case eventDrainComplete:
			e.drainDone = max(e.drainDone, ev.CreateIndex)
		}
	}
	return e
}

// readHeartbeats puts the heartbeat indexes of each node of nodes (those of
// the hosts that should be rebooting) into it: as kept at the node's
// ModifyIndex, else read, side by side (NodeReadParallelism). It returns the
// error of each read that failed, by the position of its node. What is kept
// then is what this pass found, and nothing else.
func (c *Coordinator) readHeartbeats(ctx context.Context, nodes []*phase.NodeView) []error {
	found := make([]heartbeatIndexes, len(nodes))
	errs := make([]error, len(nodes))
	var todo []int
	for i, v := range nodes {
		if e, ok := c.heartbeats.get(v.ID, v.ModifyIndex); ok {
			found[i] = e
			continue
		}
		todo = append(todo, i)
	}
	index := make([]*uint64, len(nodes)) // the ModifyIndex of each node read
	parallel.Each(len(todo), NodeReadParallelism, nil, func(k int) {
		i := todo[k]
		n, _, err := c.opt.Nodes.Info(nodes[i].ID, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			errs[i] = fmt.Errorf("read node %s: %w", nodes[i].ID, err)
			return
		}
		found[i], index[i] = heartbeatIndexesOf(n), &n.ModifyIndex
	})
	used := make(map[string]bool, len(nodes))
	for i, v := range nodes {
		if errs[i] != nil {
			continue
		}
		if index[i] != nil {
			c.heartbeats.put(v.ID, *index[i], found[i])
		}
		used[v.ID] = true
		e := found[i]
		v.ReregisteredIndex = max(v.ReregisteredIndex, e.reregistered)
		v.MissedHeartbeatIndex = max(v.MissedHeartbeatIndex, e.missed)
		v.EligibilityIndex = max(v.EligibilityIndex, e.eligibility)
		v.DrainDoneIndex = max(v.DrainDoneIndex, e.drainDone)
	}
	c.heartbeats.retain(func(id string) bool { return used[id] })
	return errs
}

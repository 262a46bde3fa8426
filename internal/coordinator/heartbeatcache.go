package coordinator

import (
	"sync"

	"github.com/hashicorp/nomad/api"
)

// The heartbeat indexes of a node (its last missed heartbeat and last
// re-registration, from its events) are read while its host should be
// rebooting: at every pass, for every host drained, rebooting or stuck. A
// node's events change only with a write to the node, which gives it a new
// ModifyIndex (nomad/state/state_store.go upsertNodeEvents and
// updateNodeStatusTxn set it with the events they add), so what a read found
// holds while the node list shows the same ModifyIndex: the node is read again
// only when it changed.

// heartbeatCache keeps, by node ID, the heartbeat indexes read in the last pass.
type heartbeatCache struct {
	mu    sync.Mutex
	nodes map[string]heartbeatIndexes
	used  map[string]heartbeatIndexes // those the current pass used
}

type heartbeatIndexes struct {
	modifyIndex          uint64 // the node's, when read
	reregistered, missed uint64
	// eligibility and drainDone: the indexes of the node's last eligibility
	// event (either way) and last "Node drain complete" event.
	eligibility, drainDone uint64
}

// get returns the indexes of the node at modifyIndex, if kept.
func (h *heartbeatCache) get(id string, modifyIndex uint64) (heartbeatIndexes, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.nodes[id]
	if !ok || e.modifyIndex != modifyIndex {
		return heartbeatIndexes{}, false
	}
	h.keep(id, e)
	return e, true
}

// put keeps what a read of the node found.
func (h *heartbeatCache) put(id string, e heartbeatIndexes) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keep(id, e)
}

func (h *heartbeatCache) keep(id string, e heartbeatIndexes) {
	if h.used == nil {
		h.used = map[string]heartbeatIndexes{}
	}
	h.used[id] = e
}

// passDone forgets the nodes the pass did not use.
func (h *heartbeatCache) passDone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes, h.used = h.used, nil
}

// heartbeatIndexesOf returns the node's last re-registration and missed
// heartbeat indexes from its events.
func heartbeatIndexesOf(n *api.Node) heartbeatIndexes {
	e := heartbeatIndexes{modifyIndex: n.ModifyIndex}
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

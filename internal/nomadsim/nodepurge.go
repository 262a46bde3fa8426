package nomadsim

import (
	"errors"
	"net/http"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// eventNodeDeregistration is the event type of a node's removal
// (nomad/structs/event.go TypeNodeDeregistration; nomad/state/events.go gives
// it to NodeDeregisterRequestType), its payload the node as it was.
const eventNodeDeregistration = "NodeDeregistration"

// handleNodePurge answers PUT|POST /v1/node/:id/purge, `nomad node purge`
// (command/agent/node_endpoint.go nodePurge → nomad/node_endpoint.go
// Node.Deregister): node:write; the exact node ID ("node not found" otherwise,
// a 500 as the RPC's plain error is).
func (s *Sim) handleNodePurge(w http.ResponseWriter, r *http.Request, id string) {
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(true) }) == nil {
		return
	}
	resp, err := s.purgeNode(id)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeUpdateResponse(w, resp)
}

// PurgeNode removes the node of host from the cluster, as `nomad node purge`
// does (purgeNode).
func (s *Sim) PurgeNode(host string) error {
	s.mu.Lock()
	h, ok := s.hosts[host]
	id := ""
	if ok {
		id = h.NodeID
	}
	s.mu.Unlock()
	if !ok || id == "" {
		return errors.New("host " + host + " has no Nomad node")
	}
	_, err := s.purgeNode(id)
	return err
}

// purgeNode is Node.Deregister (nomad/node_endpoint.go deregister,
// nomad/state/state_store.go deleteNodeTxn): the node is deleted from the
// nodes table at a new index, the leader's heartbeat timer for it cleared
// (clearHeartbeatTimer), a NodeDeregistration event published, and its
// allocations, which the scheduler then finds on a node that no longer exists
// (scheduler/util.go taintedNodes: a missing node is tainted, its allocations
// lost), stopped as lost and placed again elsewhere (createNodeEvals).
//
// Simplified: a real client that still runs registers again under the same ID
// on its next heartbeat ("node not found"); the emulator's client does not, not
// even when its host boots again: purge the node of a host that is down for
// good (SetBootBlocked), or gone.
func (s *Sim) purgeNode(id string) (nodeUpdateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return nodeUpdateResponse{}, errors.New("missing node ID for client deregistration")
	}
	sn, ok := s.cluster.nodes[id]
	if !ok {
		return nodeUpdateResponse{}, errors.New("node not found")
	}
	c := &s.cluster
	c.nodeDownAllocsLocked(s, id)
	idx := s.bumpLocked()
	if hb := c.hb.nodes[id]; hb != nil {
		hb.gen++ // a timer armed for it does not fire
		delete(c.hb.nodes, id)
	}
	delete(c.nodes, id)
	c.byHost, c.cache.ids = nil, nil
	n := *sn.node
	n.ModifyIndex = idx
	delete(c.wl.triggers.seen, id) // a node registered again under this ID is a new one (evals.go)
	c.topics.nodeWrittenLocked(id)
	c.nodesIndex = idx
	c.nodeEventLocked(&n, idx, eventNodeDeregistration)
	c.scheduleLocked(s, time.Now())
	return nodeUpdateResponse{NodeModifyIndex: idx, Index: idx}, nil
}

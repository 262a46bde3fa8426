package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/nodegroups"
	"github.com/rollboot/rollboot/internal/store"
)

// A node's owner holds it out of the rollout with its Nomad node meta
// (`nomad node meta apply rollboot_pause="reason"`): a fact Nomad keeps about
// the node, set with a token that may write that node, which holds that host
// only. The node list does not carry meta, so the pass asks Nomad which of the
// pending hosts' nodes have the key (a filter on the full node, as the groups'
// members are asked), and reads the value of those that have it. Every change
// to a node's meta raises its ModifyIndex: the client applies it
// (client/meta_endpoint.go NodeMeta.Apply) and sends the node to the servers
// (its updateNode, then Node.Register), whose state store writes the node at
// the new index (nomad/state/state_store.go upsertNodeTxn). So a node is asked
// about again only when its ModifyIndex moved, and the node event stream,
// which carries that write, wakes a pass for it. The emulator models the same
// (nomadsim applyNodeMetaLocked, syncMetaLocked).

// optOutAsked is the pending nodes' opt-outs as last asked of Nomad (the pass
// goroutine's): the ModifyIndex each was asked at, and the value of the key
// on those that have it.
type optOutAsked struct {
	index  map[string]uint64
	reason map[string]string
}

// optOutFilter selects the nodes that have the opt-out key.
var optOutFilter = strconv.Quote(admission.OptOutMetaKey) + " in Meta"

// readOptOut puts in s.optOut the pending hosts whose node opted out, with its
// reason. A node that cannot be asked about holds its host (fail closed), with
// the error as its reason.
func (c *Coordinator) readOptOut(ctx context.Context, s *snapshot) {
	a := &c.optOut
	if a.index == nil {
		a.index, a.reason = map[string]uint64{}, map[string]string{}
	}
	pending := map[string]string{} // node ID -> host
	var changed []string
	for _, name := range s.names {
		hv := s.hosts[name]
		if s.plans[name].Phase != store.PhasePending || hv.node == nil || s.nodes[hv.node.ID] == nil {
			continue
		}
		id := hv.node.ID
		pending[id] = name
		if idx, ok := a.index[id]; !ok || idx != s.nodes[id].ModifyIndex {
			changed = append(changed, id)
		}
	}
	slices.Sort(changed)
	if len(changed) > 0 {
		if err := c.askOptOut(ctx, s, changed); err != nil {
			c.log.Warn("node meta opt-out cannot be read: holding the hosts asked about", "err", err)
			for _, id := range changed {
				delete(a.index, id)
				a.reason[id] = "cannot read the node's meta: " + err.Error()
			}
		}
	}
	s.optOut = map[string]string{}
	for id, host := range pending {
		if why, ok := a.reason[id]; ok {
			s.optOut[host] = why
		}
	}
	for id := range a.index {
		if _, ok := pending[id]; !ok {
			delete(a.index, id) // no longer pending: asked again when it is
			delete(a.reason, id)
		}
	}
}

// askOptOut asks Nomad which of the nodes ids have the opt-out key, and reads
// the value on those that have it: in one node list, of those nodes when they
// are few (nodegroups.MaxTargeted), else of every node that has the key (a new
// leader's first pass, with every host pending: one request, not one per
// batch of nodes).
func (c *Coordinator) askOptOut(ctx context.Context, s *snapshot, ids []string) error {
	a := &c.optOut
	filter := optOutFilter
	if len(ids) <= nodegroups.MaxTargeted {
		terms := make([]string, len(ids))
		for i, id := range ids {
			terms[i] = "ID == " + strconv.Quote(id)
		}
		filter += " and (" + strings.Join(terms, " or ") + ")"
	}
	with, _, err := c.opt.Nodes.List((&api.QueryOptions{Filter: filter}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list nodes with meta %s: %w", admission.OptOutMetaKey, err)
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	has := map[string]bool{}
	for _, n := range with {
		if asked[n.ID] {
			has[n.ID] = true
		}
	}
	for _, id := range ids {
		if !has[id] {
			a.index[id] = s.nodes[id].ModifyIndex
			delete(a.reason, id)
			continue
		}
		n, _, err := c.opt.Nodes.Info(id, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("read node %s: %w", id, err)
		}
		// The node as read decides: its key may have gone since the list.
		why, ok := n.Meta[admission.OptOutMetaKey]
		a.index[id] = n.ModifyIndex
		switch {
		case !ok:
			delete(a.reason, id)
		case why == "":
			a.reason[id] = "(no reason given)"
		default:
			a.reason[id] = why
		}
	}
	return nil
}

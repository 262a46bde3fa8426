// Package optout tells which nodes their owner holds out of the rollout with
// the Nomad node meta key rollboot_pause, asking Nomad again only about the
// nodes whose ModifyIndex moved.
//
// The key is set with `nomad node meta apply rollboot_pause="reason"`: a fact
// Nomad keeps about the node, set with a token that may write that node, which
// holds that host only. The node list does not carry meta, so Nomad is asked
// which of the nodes have the key (a filter on the full node, as package
// nodegroups asks for the groups' members), and the value of those that have
// it is read. Every change to a node's meta raises its ModifyIndex: the client
// applies it (client/meta_endpoint.go NodeMeta.Apply) and sends the node to the
// servers (its updateNode, then Node.Register), whose state store writes the
// node at the new index (nomad/state/state_store.go upsertNodeTxn). So a node
// is asked about again only when its ModifyIndex moved, and the node event
// stream, which carries that write, wakes a pass for it. The emulator models
// the same (nomadsim applyNodeMetaLocked, syncMetaLocked).
package optout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/nodegroups"
)

// Nodes lists the nodes a filter selects and reads one; *api.Nodes
// implements it.
type Nodes interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
}

// filter selects the nodes that have the opt-out key.
var filter = strconv.Quote(admission.OptOutMetaKey) + " in Meta"

// Asker is the opt-outs of the nodes asked about as last asked of Nomad. It
// is used by one goroutine (the coordinator's pass); its zero value knows
// nothing.
type Asker struct {
	// index: the ModifyIndex each node was asked at; reason: the value of the
	// key on those that have it, or why a node cannot be asked about.
	index  map[string]uint64
	reason map[string]string
}

// Reasons returns the nodes of pending (node ID -> its ModifyIndex, as the
// node list shows it) that opted out, with the reason each gives, asking
// Nomad only about those whose ModifyIndex moved since it last asked. A node
// that cannot be asked about is returned with the error as its reason (fail
// closed), and the error is returned too, for the log. What is kept is that of
// the nodes of pending, and no other: a node is asked again once it is pending
// again.
func (a *Asker) Reasons(ctx context.Context, nodes Nodes, pending map[string]uint64) (map[string]string, error) {
	if a.index == nil {
		a.index, a.reason = map[string]uint64{}, map[string]string{}
	}
	var changed []string
	for id, modify := range pending {
		if idx, ok := a.index[id]; !ok || idx != modify {
			changed = append(changed, id)
		}
	}
	slices.Sort(changed)
	var err error
	if len(changed) > 0 {
		if err = a.ask(ctx, nodes, pending, changed); err != nil {
			for _, id := range changed {
				delete(a.index, id)
				a.reason[id] = "cannot read the node's meta: " + err.Error()
			}
		}
	}
	out := map[string]string{}
	for id := range pending {
		if why, ok := a.reason[id]; ok {
			out[id] = why
		}
	}
	for id := range a.index {
		if _, ok := pending[id]; !ok {
			delete(a.index, id)
			delete(a.reason, id)
		}
	}
	return out, err
}

// Pending is the node of a pending host: its ID, and its ModifyIndex as the
// node list shows it.
type Pending struct {
	NodeID      string
	ModifyIndex uint64
}

// HostReasons is Reasons by host: the hosts of pending whose node opted out,
// with the reason each gives.
func (a *Asker) HostReasons(ctx context.Context, nodes Nodes, pending map[string]Pending) (map[string]string, error) {
	hostOf := make(map[string]string, len(pending))
	byNode := make(map[string]uint64, len(pending))
	for host, p := range pending {
		hostOf[p.NodeID], byNode[p.NodeID] = host, p.ModifyIndex
	}
	reasons, err := a.Reasons(ctx, nodes, byNode)
	out := make(map[string]string, len(reasons))
	for id, why := range reasons {
		out[hostOf[id]] = why
	}
	return out, err
}

// ask asks Nomad which of the nodes ids have the opt-out key, and reads the
// value on those that have it: in one node list, of those nodes when they are
// few (nodegroups.MaxTargeted), else of every node that has the key (a new
// leader's first pass, with every host pending: one request, not one per
// batch of nodes).
func (a *Asker) ask(ctx context.Context, nodes Nodes, pending map[string]uint64, ids []string) error {
	f := filter
	if len(ids) <= nodegroups.MaxTargeted {
		terms := make([]string, len(ids))
		for i, id := range ids {
			terms[i] = "ID == " + strconv.Quote(id)
		}
		f += " and (" + strings.Join(terms, " or ") + ")"
	}
	with, _, err := nodes.List((&api.QueryOptions{Filter: f}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list nodes with meta %s: %w", admission.OptOutMetaKey, err)
	}
	has := map[string]bool{}
	for _, n := range with {
		has[n.ID] = true
	}
	for _, id := range ids {
		if !has[id] {
			a.index[id] = pending[id]
			delete(a.reason, id)
			continue
		}
		n, _, err := nodes.Info(id, (&api.QueryOptions{}).WithContext(ctx))
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

package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/watch"
)

// The node list from Nomad's event stream. Watching the node list with a
// blocking query reads every node again at each change: at a thousand nodes,
// 600 KB decoded for every drain, status and eligibility change of a rollout,
// a fifth of its CPU. The event stream's Node topic carries the node written,
// alone (nomad/state/events.go: one event per node row a Raft apply wrote, its
// payload the node after the write). So the follower subscribes first, then
// reads the whole list once, and applies to it every node event after the
// list's index: a write before the subscription is in the list, one after it
// is in the stream, and the events the stream replays from its buffer
// (a subscription at index 0 starts at the oldest event kept) are older than
// the list and skipped. The list it keeps is the node list as a blocking query
// would have answered it at the last event's index.
//
// It starts again with a new subscription and a fresh list after an error, an
// end of the stream, and every watch.MaxWait: as often as the blocking query
// asked again, so that a connection that went silent (Nomad sends a heartbeat
// every 30 s; the client drops them) is not trusted for longer than a blocking
// query would have been. Meanwhile the passes read the list themselves.

// NodeEventsAPI subscribes to the node writes (Nomad's event stream, topic
// Node): the events from the oldest kept at or after index.
type NodeEventsAPI interface {
	NodeEvents(ctx context.Context, index uint64) (<-chan *api.Events, error)
}

// NomadNodeEvents is NodeEventsAPI over the Nomad API (nomad/api EventStream).
type NomadNodeEvents struct{ Client *api.Client }

// NodeEvents streams the events of every node (topic Node, key "*").
func (n NomadNodeEvents) NodeEvents(ctx context.Context, index uint64) (<-chan *api.Events, error) {
	return n.Client.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: {"*"}}, index, &api.QueryOptions{})
}

// followNodes keeps the mailbox's node list current from the event stream
// until ctx ends, poking the reconcile loop after each change.
func (c *Coordinator) followNodes(ctx context.Context, poke func()) {
	fails := 0
	for ctx.Err() == nil {
		err := c.followNodesOnce(ctx, poke)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0 // its period ended: subscribe again
			continue
		}
		c.mail.setNodes(nil, 0) // not known to be current: passes read it
		fails++
		d := watch.DefaultRetry(err, fails)
		c.log.Warn("node event stream failed: the passes read the node list until it is back",
			"err", err, "retry_in", d, "failures", fails)
		if !watch.Sleep(ctx, d) {
			return
		}
	}
}

// followNodesOnce subscribes, reads the list, and applies the events for one
// period (nil when the period ended).
func (c *Coordinator) followNodesOnce(parent context.Context, poke func()) error {
	ctx, cancel := context.WithTimeout(parent, watch.MaxWait)
	defer cancel()
	events, err := c.opt.NodeEvents.NodeEvents(ctx, 0)
	if err != nil {
		return fmt.Errorf("subscribe to the node events: %w", err)
	}
	list, meta, err := c.opt.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	// An item at or before the list's index is in the list. Items after it are
	// applied in the order they come (the emulator may send two at one index).
	listed, index := meta.LastIndex, meta.LastIndex
	had := c.mail.nodesAt(index)
	c.mail.setNodes(list, index) // the next pass takes it (nodes.go)
	if !had {
		poke()
	}
	for {
		var evs *api.Events
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case evs, ok = <-events:
		}
		// Take every batch already received: one list and one poke for all.
		var changed []*api.NodeListStub
		var gone []string
		for {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the node event stream ended")
			}
			if evs.Err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("node event stream: %w", evs.Err)
			}
			if evs.Index > listed {
				ch, gn, err := nodeChanges(evs)
				if err != nil {
					return err
				}
				changed, gone = append(changed, ch...), append(gone, gn...)
				index = max(index, evs.Index)
			}
			select {
			case evs, ok = <-events:
				continue
			default:
			}
			break
		}
		if len(changed) == 0 && len(gone) == 0 {
			continue
		}
		list = applyNodeChanges(list, changed, gone)
		c.mail.setNodes(list, index)
		poke()
	}
}

// nodeChanges returns the nodes an item of the stream wrote, as list stubs, and
// the IDs of those it deregistered.
func nodeChanges(evs *api.Events) (changed []*api.NodeListStub, gone []string, err error) {
	for i := range evs.Events {
		ev := &evs.Events[i]
		if ev.Topic != api.TopicNode {
			continue
		}
		if ev.Type == "NodeDeregistration" { // nomad/structs/event.go TypeNodeDeregistration
			gone = append(gone, ev.Key)
			continue
		}
		n, err := ev.Node()
		if err != nil || n == nil {
			return nil, nil, fmt.Errorf("node event %s at index %d: no node in its payload (%v)", ev.Type, ev.Index, err)
		}
		changed = append(changed, nodeListStub(n))
	}
	return changed, gone, nil
}

// nodeListStub is the node as the node list shows it without os or resources
// (nomad/structs/structs.go Node.Stub).
func nodeListStub(n *api.Node) *api.NodeListStub {
	addr := n.HTTPAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return &api.NodeListStub{
		Address:               addr,
		ID:                    n.ID,
		Datacenter:            n.Datacenter,
		Name:                  n.Name,
		NodeClass:             n.NodeClass,
		NodePool:              n.NodePool,
		Version:               n.Attributes["nomad.version"],
		Drain:                 n.DrainStrategy != nil,
		SchedulingEligibility: n.SchedulingEligibility,
		Status:                n.Status,
		StatusDescription:     n.StatusDescription,
		Drivers:               n.Drivers,
		LastDrain:             n.LastDrain,
		CreateIndex:           n.CreateIndex,
		ModifyIndex:           n.ModifyIndex,
	}
}

// applyNodeChanges returns a new list: list with the nodes of changed in place
// of theirs (the last one of a node wins), those it lacks added, and those gone
// removed, in the list's order (by ID, as Nomad lists them). list is not
// modified: a pass may hold it.
func applyNodeChanges(list, changed []*api.NodeListStub, gone []string) []*api.NodeListStub {
	byID := make(map[string]*api.NodeListStub, len(changed))
	for _, n := range changed {
		byID[n.ID] = n
	}
	for _, id := range gone {
		byID[id] = nil
	}
	out := make([]*api.NodeListStub, 0, len(list)+len(changed))
	for _, n := range list {
		if m, ok := byID[n.ID]; ok {
			delete(byID, n.ID)
			if m == nil {
				continue
			}
			n = m
		}
		out = append(out, n)
	}
	added := false
	for _, n := range byID {
		if n != nil {
			out = append(out, n)
			added = true
		}
	}
	if added {
		slices.SortFunc(out, func(a, b *api.NodeListStub) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out
}

// catchUpWait is how long a pass waits for the node events of its own last
// node write before it reads the whole list itself (nodeList). The event
// follows the write's answer within milliseconds; a pass chained after a
// drain or an eligibility change would otherwise read every node again.
const catchUpWait = 250 * time.Millisecond

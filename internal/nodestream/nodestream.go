// Package nodestream applies Nomad's node event stream (topic Node) to a node list.
package nodestream

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/hashicorp/nomad/api"
)

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

// Changes returns the nodes an item of the stream wrote, as list stubs, and
// the IDs of those it deregistered. The Node topic carries the node written,
// alone (nomad/state/events.go: one event per node row a Raft apply wrote, its
// payload the node after the write); events of other topics are ignored.
func Changes(evs *api.Events) (changed []*api.NodeListStub, gone []string, err error) {
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
		changed = append(changed, listStub(n))
	}
	return changed, gone, nil
}

// written returns the nodes an item of the stream wrote, in full (Changes
// checked that each has one).
func written(evs *api.Events) []*api.Node {
	var out []*api.Node
	for i := range evs.Events {
		ev := &evs.Events[i]
		if ev.Topic != api.TopicNode || ev.Type == "NodeDeregistration" {
			continue
		}
		if n, err := ev.Node(); err == nil && n != nil {
			out = append(out, n)
		}
	}
	return out
}

// listStub is the node as the node list shows it without os or resources
// (nomad/structs/structs.go Node.Stub).
// Stub returns the node as the node list shows it.
func Stub(n *api.Node) *api.NodeListStub { return listStub(n) }

func listStub(n *api.Node) *api.NodeListStub {
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

// Apply returns a new list: list with the nodes of changed in place of theirs
// (the last one of a node wins), those it lacks added, and those gone removed,
// in the list's order (by ID, as Nomad lists them). list is not modified: a
// reader may hold it.
func Apply(list, changed []*api.NodeListStub, gone []string) []*api.NodeListStub {
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

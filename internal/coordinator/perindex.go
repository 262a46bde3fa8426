package coordinator

import "github.com/hashicorp/nomad/api"

// perIndex keeps, by node ID, what a pass derived from a read of a node (its
// heartbeat events, its capacity), with the node's ModifyIndex at that read.
// Every change to a node moves its ModifyIndex (heartbeats do not), so while
// the node list shows the same index what was derived holds and the node is
// not read again: keyed by content, as the store keeps the variables it read
// (store/cache.go). Owned by the pass goroutine; a pass reads the nodes it
// lacks side by side and puts what it read once they are all back.
type perIndex[T any] struct {
	m map[string]indexed[T]
}

type indexed[T any] struct {
	index uint64
	val   T
}

// get returns what was kept of node id at index.
func (p *perIndex[T]) get(id string, index uint64) (T, bool) {
	e, ok := p.m[id]
	if !ok || e.index != index {
		var zero T
		return zero, false
	}
	return e.val, true
}

// put keeps v, derived from node id read at index.
func (p *perIndex[T]) put(id string, index uint64, v T) {
	if p.m == nil {
		p.m = map[string]indexed[T]{}
	}
	p.m[id] = indexed[T]{index: index, val: v}
}

// retain forgets the nodes keep does not want.
func (p *perIndex[T]) retain(keep func(id string) bool) {
	for id := range p.m {
		if !keep(id) {
			delete(p.m, id)
		}
	}
}

// prune forgets the nodes gone from nodes.
func (p *perIndex[T]) prune(nodes map[string]*api.NodeListStub) {
	p.retain(func(id string) bool { return nodes[id] != nil })
}

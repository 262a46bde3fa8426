// Package byindex keeps, by node ID, what was derived from a read of a Nomad
// node, with the node's ModifyIndex at that read, for as long as the node
// list shows the same index.
//
// Every change to a node moves its ModifyIndex (heartbeats do not), so while
// the node list shows the same index what was derived holds and the node is
// not read again: keyed by content, as the store keeps the variables it read
// (store/cache.go). A Cache is owned by one goroutine; a caller that reads
// nodes side by side puts what it read once they are all back.
package byindex

import "github.com/hashicorp/nomad/api"

// Cache keeps values derived from node reads, by node ID and ModifyIndex.
// Its zero value keeps nothing.
type Cache[T any] struct {
	m map[string]indexed[T]
}

type indexed[T any] struct {
	index uint64
	val   T
}

// Get returns what was kept of node id at index.
func (c *Cache[T]) Get(id string, index uint64) (T, bool) {
	e, ok := c.m[id]
	if !ok || e.index != index {
		var zero T
		return zero, false
	}
	return e.val, true
}

// Put keeps v, derived from node id read at index.
func (c *Cache[T]) Put(id string, index uint64, v T) {
	if c.m == nil {
		c.m = map[string]indexed[T]{}
	}
	c.m[id] = indexed[T]{index: index, val: v}
}

// PutAll keeps every value o keeps, at its index, in place of what c kept of
// the same node.
func (c *Cache[T]) PutAll(o Cache[T]) {
	for id, e := range o.m {
		c.Put(id, e.index, e.val)
	}
}

// Retain forgets the nodes keep does not want.
func (c *Cache[T]) Retain(keep func(id string) bool) {
	for id := range c.m {
		if !keep(id) {
			delete(c.m, id)
		}
	}
}

// Prune forgets the nodes gone from nodes.
func (c *Cache[T]) Prune(nodes map[string]*api.NodeListStub) {
	c.Retain(func(id string) bool { return nodes[id] != nil })
}

// Len is how many nodes are kept.
func (c *Cache[T]) Len() int { return len(c.m) }

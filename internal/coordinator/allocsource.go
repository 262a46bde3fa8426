package coordinator

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// allocSource is where a pass finds the allocations on a node: the newest
// answer of the node's allocation watch (taken from the mailbox as the pass
// starts), else a read of this pass, else a read now, kept for the rest of
// the pass. A rebooted node's allocations are so read once in the pass that
// finds it back (its system jobs, then its workloads' health), and not at all
// while its watch runs.
//
// The reads of a pass are kept with their index, for the allocation watches
// the pass starts (wake.go allocWatchers): a new watch starts from what the
// pass read, at the index Nomad answered it with, instead of reading the same
// allocations again first, and that first answer does not poke one more pass
// with nothing changed. Nomad's index for a node's allocations is the highest
// ModifyIndex among them (nomad/node_endpoint.go GetAllocs; the allocations
// table index when the node has none), and its blocking query answers once
// that passes the index given, so a change since the pass read them wakes the
// watch at once, as it would have woken the first read.
type allocSource struct {
	// watched: the allocation watches' answers as the pass took them (the
	// pass goroutine's).
	watched map[string][]*api.Allocation
	// read: the reads of this pass, by node ID (under Coordinator.mu: the
	// capacity gate reads side by side, capacityread.go).
	read map[string]allocRead
}

// allocRead is one read of a node's allocations, with its index (0: Nomad
// gave none).
type allocRead struct {
	index  uint64
	allocs []*api.Allocation
}

// newAllocPass starts a pass from the allocation watches' answers: the last pass's
// reads are forgotten (the loop took them: takeAllocReads).
func (c *Coordinator) newAllocPass(watched map[string][]*api.Allocation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allocs.watched, c.allocs.read = watched, nil
}

// noteAllocRead keeps a read of the allocations of nodeID by the current pass.
func (c *Coordinator) noteAllocRead(nodeID string, meta *api.QueryMeta, allocs []*api.Allocation) {
	r := allocRead{allocs: allocs}
	if meta != nil {
		r.index = meta.LastIndex
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allocs.read == nil {
		c.allocs.read = map[string]allocRead{}
	}
	c.allocs.read[nodeID] = r
}

// takeAllocReads returns the reads of the last pass that a watch may start
// from (those with an index).
func (c *Coordinator) takeAllocReads() map[string]allocRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]allocRead{}
	for id, r := range c.allocs.read {
		if r.index > 0 {
			out[id] = r
		}
	}
	return out
}

// allocsOnNode returns the allocations on a node as this pass sees them
// (allocSource).
func (c *Coordinator) allocsOnNode(ctx context.Context, nodeID string) ([]*api.Allocation, error) {
	if allocs, ok := c.allocs.watched[nodeID]; ok {
		return allocs, nil
	}
	c.mu.Lock()
	r, ok := c.allocs.read[nodeID]
	c.mu.Unlock()
	if ok {
		return r.allocs, nil
	}
	allocs, meta, err := c.opt.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("allocations of node %s: %w", nodeID, err)
	}
	c.noteAllocRead(nodeID, meta, allocs)
	return allocs, nil
}

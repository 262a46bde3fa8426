package coordinator

import "github.com/hashicorp/nomad/api"

// The allocation reads of a pass, kept for the allocation watches that the
// pass starts (wake.go allocWatchers): a new watch starts from what the pass
// read, at the index Nomad answered it with, instead of reading the same
// allocations again first, and that first answer no longer pokes one more
// pass with nothing changed. Nomad's index for a node's allocations is the
// highest ModifyIndex among them (nomad/node_endpoint.go GetAllocs; the
// allocations table index when the node has none), and its blocking query
// answers once that passes the index given, so a change since the pass read
// them wakes the watch at once, as it would have woken the first read.

// allocRead is one read of a node's allocations, with its index.
type allocRead struct {
	index  uint64
	allocs []*api.Allocation
}

// noteAllocRead keeps a read of the allocations of nodeID by the current pass.
func (c *Coordinator) noteAllocRead(nodeID string, meta *api.QueryMeta, allocs []*api.Allocation) {
	if meta == nil || meta.LastIndex == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allocReads == nil {
		c.allocReads = map[string]allocRead{}
	}
	c.allocReads[nodeID] = allocRead{index: meta.LastIndex, allocs: allocs}
}

// takeAllocReads returns the reads kept since the last call, and forgets them:
// they are the last pass's (the loop takes them after each pass).
func (c *Coordinator) takeAllocReads() map[string]allocRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.allocReads
	c.allocReads = nil
	return r
}

// passAllocs returns the allocations on a node already read in this pass:
// for a host that waits for them (allocsOnNode), or for the capacity gate.
func passAllocs(s *snapshot, nodeID string) ([]*api.Allocation, bool) {
	if allocs, ok := s.allocs[nodeID]; ok {
		return allocs, true
	}
	if v := s.capacity; v != nil {
		allocs, ok := v.allocs[nodeID]
		return allocs, ok
	}
	return nil, false
}

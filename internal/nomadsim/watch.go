package nomadsim

import (
	"strings"
	"time"
)

// Blocking queries wake only on their own data.
//
// In Nomad a blocking query runs its state query with a memdb WatchSet
// (nomad/rpc.go blockingRPC): the state store adds the watch channel of what it
// read (nomad/state/state_store.go Nodes, NodesByIDPrefix, NodeByID,
// allocsByNodeTxn; nomad/state/state_store_variables.go
// GetVariablesByNamespaceAndPrefix, GetVariable), and the query sleeps until one
// of those channels fires or its wait runs out. Only then does it run the query
// again, and it answers once the result's index is past the caller's index. A
// write elsewhere (another variable prefix, another table) closes none of the
// watched channels, so it does not end the wait, even when it moves the index
// the query answers with (a variable list answers with the variables table index,
// nomad/variables_endpoint.go List).
//
// The emulator keeps one "something changed" channel (Sim.notify); a blocking
// query registers a watch function that computes a version of what it watches,
// and a change that leaves that version as it was does not end its wait. Writes
// that are Raft applies give the items they touch a new, higher ModifyIndex, so
// the count and the highest ModifyIndex of the watched items change exactly when
// an item is created, changed or deleted.

// watchVersion is the version of the items a blocking query watches.
type watchVersion struct {
	n   int
	max uint64
}

func (v *watchVersion) add(modifyIndex uint64) {
	v.n++
	v.max = max(v.max, modifyIndex)
}

// watchVarPrefix watches the variables of namespace ns ("*": all of them) whose
// path starts with prefix: the iterator watch channel of the prefix in the
// variables id index (state_store_variables.go GetVariablesByNamespaceAndPrefix;
// listAllVariables walks the whole table). Called with s.mu held.
func (s *Sim) watchVarPrefix(ns, prefix string) func() watchVersion {
	return func() watchVersion {
		var v watchVersion
		for k, sv := range s.vars.vars {
			if (ns == "*" || k.ns == ns) && strings.HasPrefix(k.path, prefix) {
				v.add(sv.modifyIndex)
			}
		}
		return v
	}
}

// watchVar watches one variable (state_store_variables.go GetVariable, a
// FirstWatch on the exact key). While it does not exist Nomad watches the
// deepest radix node on its path (go-immutable-radix GetWatch), which fires for
// writes near the key; the emulator wakes on any write to the namespace's
// variables then: more wake-ups than Nomad, never fewer.
func (s *Sim) watchVar(ns, path string) func() watchVersion {
	return func() watchVersion {
		if sv, ok := s.vars.vars[varKey{ns, path}]; ok {
			return watchVersion{n: 1, max: sv.modifyIndex}
		}
		return s.watchVarPrefix(ns, "")()
	}
}

// watchNodePrefix watches the nodes whose ID starts with prefix (all of them for
// ""): state_store.go Nodes watches the whole "id" index, NodesByIDPrefix the
// prefix's iterator channel.
func (s *Sim) watchNodePrefix(prefix string) func() watchVersion {
	return func() watchVersion {
		var v watchVersion
		for id, sn := range s.cluster.nodes {
			if strings.HasPrefix(id, prefix) {
				v.add(sn.node.ModifyIndex)
			}
		}
		return v
	}
}

// watchNodeAllocs watches the allocations of one node: allocsByNodeTxn watches
// the "node_prefix" iterator of the node, not the allocs table.
func (s *Sim) watchNodeAllocs(nodeID string) func() watchVersion {
	return func() watchVersion {
		var v watchVersion
		for _, sa := range s.cluster.allocs {
			if sa.a.NodeID == nodeID {
				v.add(sa.a.ModifyIndex)
			}
		}
		return v
	}
}

// watchStats counts what blocking queries do while they wait, so that tests can
// tell a query that slept through a write from one that has not started yet.
type watchStats struct {
	sleeping int    // blocking queries waiting for their watched data to change
	checked  uint64 // the Raft index when a sleeping query last re-checked its data
}

// WatchStats returns how many blocking queries sleep now, and the Raft index at
// which a sleeping query last re-checked its watched data: once it is at or past
// a write's index, every query that slept through the write has seen it.
func (s *Sim) WatchStats() (sleeping int, checked uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches.sleeping, s.watches.checked
}

// waitWatchLocked blocks, with s.mu released, until the version watch returns
// differs from ver, the emulator closes, deadline fires or done ends. It reports
// whether the watched data changed (false: deadline or done). It is called and
// returns with s.mu held.
func (s *Sim) waitWatchLocked(watch func() watchVersion, ver watchVersion, deadline <-chan time.Time, done <-chan struct{}) (changed bool) {
	s.watches.sleeping++
	defer func() { s.watches.sleeping-- }()
	for {
		ch := s.notify
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			s.mu.Lock()
			return false
		case <-done:
			s.mu.Lock()
			return false
		}
		s.mu.Lock()
		s.watches.checked = s.index
		if s.closed || watch() != ver {
			return true
		}
	}
}

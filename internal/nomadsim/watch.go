package nomadsim

import (
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
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
// The emulator keeps, like the state store, a channel per watched thing: one
// variable, a path prefix of one namespace's variables, a prefix of node IDs,
// one node's allocations (topics, below). A write closes the channels of what it
// touched, under the state lock, so only the queries watching that wake: with
// thousands of agents each watching its own plan, a write wakes one query, not
// all of them. A leadership change wakes every query (each then answers "No
// cluster leader" or re-runs on the new leader). Other blocking reads sleep on
// the one "something changed" channel (Sim.notify) and a version of what they
// read (indexWatch).

// watchVersion is the version of the items a version-checked query watches.
type watchVersion struct {
	n   int
	max uint64
}

func (v *watchVersion) add(modifyIndex uint64) {
	v.n++
	v.max = max(v.max, modifyIndex)
}

// watcher is what a blocking query sleeps on: topic, when set, returns the
// channel closed by the next write to what it watches (called with s.mu held);
// otherwise the query sleeps on Sim.notify and wakes when version changes.
type watcher struct {
	topic   func() <-chan struct{}
	version func() watchVersion
}

// topics are the channels of the watched things (go-memdb's watch channels of
// the radix nodes a query read).
type topics struct {
	vars      map[varKey]chan struct{} // one variable, by namespace and path
	varPfx    map[string]chan struct{} // the variables whose id-index key has the prefix (radixwatch.go)
	nodePfx   map[string]chan struct{} // nodes whose ID starts with the prefix
	allocs    map[string]chan struct{} // one node's allocations, by node ID
	jobAllocs map[varKey]chan struct{} // one job's allocations, by namespace and job ID
}

func topicChan[K comparable](m *map[K]chan struct{}, k K) <-chan struct{} {
	if *m == nil {
		*m = map[K]chan struct{}{}
	}
	ch, ok := (*m)[k]
	if !ok {
		ch = make(chan struct{})
		(*m)[k] = ch
	}
	return ch
}

func fire[K comparable](m map[K]chan struct{}, k K) {
	if ch, ok := m[k]; ok {
		close(ch)
		delete(m, k)
	}
}

// varWrittenLocked wakes the queries watching variable k: its own, and those
// watching a radix node on the path to its key in the "id" index
// (state_store_variables.go writes through it; radixwatch.go).
func (t *topics) varWrittenLocked(k varKey) {
	fire(t.vars, k)
	key := idKey(k.ns, k.path)
	for i := range len(key) + 1 {
		fire(t.varPfx, key[:i])
	}
}

// nodeWrittenLocked wakes the node queries whose prefix the node's ID has.
func (t *topics) nodeWrittenLocked(id string) {
	for p, ch := range t.nodePfx {
		if strings.HasPrefix(id, p) {
			close(ch)
			delete(t.nodePfx, p)
		}
	}
}

// allocWrittenLocked wakes the queries of the allocations of a's node and of
// a's job.
func (t *topics) allocWrittenLocked(a *api.Allocation) {
	fire(t.allocs, a.NodeID)
	fire(t.jobAllocs, varKey{a.Namespace, a.JobID})
}

// allLocked wakes every query (a leadership change, the emulator closing).
func (t *topics) allLocked() {
	for _, m := range []map[varKey]chan struct{}{t.vars, t.jobAllocs} {
		for k := range m {
			fire(m, k)
		}
	}
	for _, m := range []map[string]chan struct{}{t.varPfx, t.nodePfx, t.allocs} {
		for k := range m {
			fire(m, k)
		}
	}
}

// watchVarPrefix watches the variables of namespace ns ("*": all of them) whose
// path starts with prefix: the iterator watch channel of the prefix in the
// variables id index (state_store_variables.go GetVariablesByNamespaceAndPrefix,
// go-immutable-radix Iterator.SeekPrefixWatch), that of the node under which
// those variables are, or while there are none the deepest node the search
// reached, which closes for writes near the prefix (radixwatch.go);
// listAllVariables watches the whole table (state_store_variables.go Variables).
// Called with s.mu held.
func (s *Sim) watchVarPrefix(ns, prefix string) watcher {
	return watcher{topic: func() <-chan struct{} {
		if ns == "*" {
			return topicChan(&s.topics.varPfx, "")
		}
		return topicChan(&s.topics.varPfx, s.vars.radixWatch(idPrefix(ns, prefix), true))
	}}
}

// watchVar watches one variable (state_store_variables.go GetVariable, a
// FirstWatch on the exact key): its own leaf while it exists; while it does not,
// the deepest radix node on its path (go-immutable-radix Node.GetWatch), which
// closes for writes near the key too (radixwatch.go). Called with s.mu held.
func (s *Sim) watchVar(ns, path string) watcher {
	return watcher{topic: func() <-chan struct{} {
		if _, ok := s.vars.vars[varKey{ns, path}]; ok {
			return topicChan(&s.topics.vars, varKey{ns, path})
		}
		return topicChan(&s.topics.varPfx, s.vars.radixWatch(idKey(ns, path), false))
	}}
}

// watchNodePrefix watches the nodes whose ID starts with prefix (all of them for
// ""): state_store.go Nodes watches the whole "id" index, NodesByIDPrefix the
// prefix's iterator channel.
func (s *Sim) watchNodePrefix(prefix string) watcher {
	return watcher{topic: func() <-chan struct{} { return topicChan(&s.topics.nodePfx, prefix) }}
}

// watchNodeAllocs watches the allocations of one node: allocsByNodeTxn watches
// the "node_prefix" iterator of the node, not the allocs table.
func (s *Sim) watchNodeAllocs(nodeID string) watcher {
	return watcher{topic: func() <-chan struct{} { return topicChan(&s.topics.allocs, nodeID) }}
}

// watchJobAllocs watches the allocations of one job: state_store.go AllocsByJob
// watches the iterator of the allocs table's "job" index at (namespace, job ID),
// not the allocs table, and not the job itself (read with First, unwatched).
func (s *Sim) watchJobAllocs(ns, jobID string) watcher {
	return watcher{topic: func() <-chan struct{} { return topicChan(&s.topics.jobAllocs, varKey{ns, jobID}) }}
}

// watchStats counts what blocking queries do while they wait, so that tests can
// tell a query that slept through a write from one that has not started yet.
type watchStats struct {
	sleeping int    // blocking queries waiting for their watched data to change
	onNotify int    // those of them that sleep on Sim.notify (the others on topics)
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

// waitWatchLocked blocks, with s.mu released, until what w watches changes
// (its topic fires, or its version differs from ver), the emulator closes,
// deadline fires or done ends. It reports whether the watched data changed
// (false: deadline or done). It is called and returns with s.mu held.
func (s *Sim) waitWatchLocked(w watcher, ver watchVersion, deadline <-chan time.Time, done <-chan struct{}) (changed bool) {
	s.watches.sleeping++
	defer func() { s.watches.sleeping-- }()
	if w.topic == nil {
		s.watches.onNotify++
		defer func() { s.watches.onNotify-- }()
	}
	for {
		var ch <-chan struct{}
		if w.topic != nil {
			ch = w.topic()
		} else {
			ch = s.notify
		}
		if s.closed {
			return true
		}
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
		if s.closed || w.topic != nil || w.version() != ver {
			return true
		}
	}
}

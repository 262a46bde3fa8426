// Package allocsource is where a coordinator's pass finds the allocations on
// a node: the newest answer of the node's allocation watch, else the pass's
// own read, kept for the rest of the pass and for the watches the loop starts
// after it.
package allocsource

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/nomad/api"
)

// A rebooted node's allocations are so read once in the pass that finds it
// back (its system jobs, then its workloads' health), and not at all while
// its watch runs.
//
// The reads of a pass are kept with their index, for the allocation watches
// the pass starts: a new watch starts from what the pass read, at the index
// Nomad answered it with, instead of reading the same allocations again
// first, and that first answer does not poke one more pass with nothing
// changed. Nomad's index for a node's allocations is the highest ModifyIndex
// among them (nomad/node_endpoint.go GetAllocs; the allocations table index
// when the node has none), and its blocking query answers once that passes
// the index given, so a change since the pass read them wakes the watch at
// once, as it would have woken the first read.

// Nodes reads a node's allocations; *api.Nodes implements it.
type Nodes interface {
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
}

// Source is the allocations a pass sees.
type Source struct {
	Nodes Nodes
	// watched: the allocation watches' answers as the pass took them (the
	// pass goroutine's).
	watched map[string][]*api.Allocation
	// mu guards read: the capacity gate reads side by side.
	mu sync.Mutex
	// read: the reads of this pass, by node ID.
	read map[string]Read
}

// Read is one read of a node's allocations, with its index (0: Nomad gave
// none).
type Read struct {
	Index  uint64
	Allocs []*api.Allocation
}

// NewPass starts a pass from the allocation watches' answers (the pass's
// own, not shared with the watches): the last pass's reads are forgotten (the
// loop took them: TakeReads).
func (s *Source) NewPass(watched map[string][]*api.Allocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched, s.read = watched, nil
}

// InPass returns the allocations on nodeID as the current pass read them (its
// own reads, the capacity gate's, those read ahead), never a watch's answer;
// ok is false when the pass did not read them.
func (s *Source) InPass(nodeID string) (allocs []*api.Allocation, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.read[nodeID]
	return r.Allocs, ok
}

// Noted keeps a read of the allocations of nodeID by the current pass.
func (s *Source) Noted(nodeID string, meta *api.QueryMeta, allocs []*api.Allocation) {
	r := Read{Allocs: allocs}
	if meta != nil {
		r.Index = meta.LastIndex
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read == nil {
		s.read = map[string]Read{}
	}
	s.read[nodeID] = r
}

// TakeReads returns the reads of the last pass that a watch may start from
// (those with an index).
func (s *Source) TakeReads() map[string]Read {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Read{}
	for id, r := range s.read {
		if r.Index > 0 {
			out[id] = r
		}
	}
	return out
}

// OnNode returns the allocations on a node as this pass sees them: the
// watch's answer as the pass took it, else the pass's read (ReadInPass).
func (s *Source) OnNode(ctx context.Context, nodeID string) ([]*api.Allocation, error) {
	if allocs, ok := s.watched[nodeID]; ok {
		return allocs, nil
	}
	return s.ReadInPass(ctx, nodeID)
}

// ReadInPass returns the allocations on the node as this pass read them
// from Nomad, reading them now if it has not: never a watch's answer, which
// may lag.
func (s *Source) ReadInPass(ctx context.Context, nodeID string) ([]*api.Allocation, error) {
	s.mu.Lock()
	r, ok := s.read[nodeID]
	s.mu.Unlock()
	if ok {
		return r.Allocs, nil
	}
	allocs, meta, err := s.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("allocations of node %s: %w", nodeID, err)
	}
	s.Noted(nodeID, meta, allocs)
	return allocs, nil
}

// Ahead is reads of node allocations started ahead of the pass step that
// needs them, beside whatever the pass does meanwhile: a pass starts the read
// of the node of the host next in a group's line as soon as the write that
// frees a slot of the group is stored, beside the pass's other writes,
// instead of after all of them. Each read is kept as a read of the pass
// (Noted), where the step that needs it finds it (InPass, ReadInPass) once it
// waited for the reads of its lines (Wait, WaitFor).
type Ahead struct {
	src *Source
	ctx context.Context
	// sem holds a token per read in flight, and until Widen the tokens that
	// keep the reads at ReadAheadParallelism.
	sem   chan struct{}
	widen sync.Once
	mu    sync.Mutex
	ended *sync.Cond // on mu: a read ended
	lines map[string][]string
	// reading: the reads of each line started and not ended
	reading map[string]int
}

// Ahead starts a set of reads ahead, for ctx, of the nodes in lines, by line
// (a group), in the order they are to be read.
func (s *Source) Ahead(ctx context.Context, lines map[string][]string) *Ahead {
	sem := make(chan struct{}, ReadAheadWidened)
	for range ReadAheadWidened - ReadAheadParallelism {
		sem <- struct{}{} // given back by Widen
	}
	a := &Ahead{src: s, ctx: ctx, sem: sem, lines: lines, reading: map[string]int{}}
	a.ended = sync.NewCond(&a.mu)
	return a
}

// Widen lets the reads still to start go ReadAheadWidened at a time: the
// writes they went beside are done, and what is left of them is all the
// hand-out waits for.
func (a *Ahead) Widen() {
	a.widen.Do(func() {
		for range ReadAheadWidened - ReadAheadParallelism {
			<-a.sem
		}
	})
}

// ReadNext starts reading the allocations of the next node of line, if any
// is left, at most ReadAheadParallelism reads at a time (ReadAheadWidened
// once widened); a read that fails is left out, for the step that needs it
// to make again.
func (a *Ahead) ReadNext(line string) {
	a.mu.Lock()
	ids := a.lines[line]
	if len(ids) == 0 {
		a.mu.Unlock()
		return
	}
	nodeID := ids[0]
	a.lines[line] = ids[1:]
	a.reading[line]++
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			a.reading[line]--
			a.ended.Broadcast()
			a.mu.Unlock()
		}()
		select {
		case a.sem <- struct{}{}:
		case <-a.ctx.Done():
			return
		}
		defer func() { <-a.sem }()
		allocs, meta, err := a.src.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(a.ctx))
		if err == nil {
			a.src.Noted(nodeID, meta, allocs)
		}
	}()
}

// WaitFor returns once the reads started so far for lines ended: a hand-out
// of the slots freed so far, while others may still free (reads of other
// lines may still start).
func (a *Ahead) WaitFor(lines ...string) {
	a.waitUntilIdle(func(l string) bool { return a.reading[l] > 0 && slices.Contains(lines, l) })
}

// Wait returns once every read started ended. No read may be started after
// it is called.
func (a *Ahead) Wait() {
	a.waitUntilIdle(func(l string) bool { return a.reading[l] > 0 })
}

// waitUntilIdle returns once no line is busy.
func (a *Ahead) waitUntilIdle(busy func(line string) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.anyLocked(busy) {
		a.ended.Wait()
	}
}

// anyLocked reports whether some line is busy; a.mu is held.
func (a *Ahead) anyLocked(busy func(line string) bool) bool {
	for line := range a.reading {
		if busy(line) {
			return true
		}
	}
	return false
}

// ReadAheadParallelism bounds the reads of an Ahead sent at once. They go
// beside a pass's writes and the allocation watches of the hosts coming
// back, all under the connections Nomad accepts from one client (limits
// http_max_conns_per_client, 100 by default). Once the writes are done
// (Widen), the reads left go ReadAheadWidened at a time, the bound of every
// other step of a pass: after a wave of closes, dozens of them were still
// to be read 8 at a time, a round trip per 8 that each hand-out of the wave
// waited for (docs/performance.md, the slot hand-off).
const (
	ReadAheadParallelism = 8
	ReadAheadWidened     = 32
)

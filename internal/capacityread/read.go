// Package capacityread reads from Nomad what the capacity gate (package
// capacity, through package admission) decides on, as admission asks for it:
// the allocations a drain would move and the candidate nodes of a pool,
// keeping each node's capacity while its ModifyIndex stays the same.
//
// The gate admits a host only if the allocations its drain would move fit on
// the other nodes, together with those of the nodes already out (draining, or
// out of service for rollboot) and of the hosts admitted before it in the same
// pass, which offer no room either. Reading every node and allocation each
// pass would cost too much on a large cluster, so the observation is lazy and
// driven by admission itself: only when some host is queued, the coordinator
// runs admission (pure, cheap) with what it has read; the gate notes what it
// lacks (admission.CapacityNeeds: the allocations of a node whose drain would
// move them, more candidate nodes of a pool when those read so far do not
// suffice), the Reader reads that and admission runs again, until the gate
// lacks nothing. The candidate nodes of a pool are read in a fixed order,
// twice as many each round, so a check usually reads the host's node and one
// or two others. Each node's resources are kept from pass to pass while its
// ModifyIndex stays the same; its allocations are read again in each pass that
// needs them, except a draining node's movers, kept by its ModifyIndex too
// (movers.go).
package capacityread

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/byindex"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/parallel"
)

// Nodes reads a node and the allocations on it; *api.Nodes implements it.
type Nodes interface {
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
}

// Parallelism bounds the reads of one round in flight, the allocation and
// node reads together. A check counts the allocations of every node on its
// way out (each draining or rebooting host of the rollout), read again in
// each pass that checks, all of it between a slot being freed and the next
// drain: one after the other they add a round trip each (docs/performance.md,
// "How each figure is measured"). A hand-out after a wave of closes checks
// dozens of hosts, each with its pool's candidates, about a hundred reads:
// 8, then 16 of each kind at a time, they took most of its time, and a round
// with few node reads left their share idle. The 32 in flight, sent when the
// pass's writes are done, stay under the 100 connections Nomad accepts from
// one client beside the watches, as a new leader's 64 do
// (store.ReadParallelism).
const Parallelism = 32

// Reader reads for the capacity gate. It keeps each node's capacity by its
// ModifyIndex, and the movers of each draining node (movers.go), from pass to
// pass. It is used by one goroutine (the coordinator's pass), but for
// AllocsRead, which its reads side by side call.
type Reader struct {
	Nodes Nodes
	// AllocsRead is told of each read of a node's allocations, with the
	// answer's meta (nil: nobody is told); it may be called from several
	// goroutines at once.
	AllocsRead func(nodeID string, meta *api.QueryMeta, allocs []*api.Allocation)
	// InPass, when set, gives a node's allocations as the coordinator's pass
	// read them already (ok false: not read), taken instead of a read: a
	// hand-out's gate, after the pass's own and those of an earlier hand-out
	// in the pass, reads only the nodes none of them read.
	InPass func(nodeID string) (allocs []*api.Allocation, ok bool)

	nodes  byindex.Cache[capacity.Node]
	movers byindex.Cache[[]capacity.Alloc]
}

// Streamed keeps the capacity of nodes seen in full elsewhere (the node
// event stream's payload is the whole node, as GET /v1/node/:id answers it),
// each at its ModifyIndex: the gate does not read them while it stays so.
func (r *Reader) Streamed(nodes byindex.Cache[capacity.Node]) { r.nodes.PutAll(nodes) }

// Leaving is the node of a host on its way out: draining (Draining), or
// drained or rebooting.
type Leaving struct {
	NodeID   string
	Draining bool
}

// Pass is what the gate read in one pass: what admission sees of it (Gate),
// and the allocations read, by node ID.
type Pass struct {
	Gate admission.Capacity
	// nodes: the node list of the pass.
	nodes  map[string]*api.NodeListStub
	allocs map[string][]*api.Allocation
	// kept: the movers of draining nodes taken as kept (movers.go), not read
	// in this pass.
	kept map[string][]capacity.Alloc
}

// NewPass starts the reads of a pass, over its node list (nodes), with the
// nodes of the hosts on their way out, each node's group (groupOf) and the
// share of each node kept free (headroom): it sorts the nodes into the
// candidates of each pool and the nodes out, and forgets what it kept of the
// nodes gone, and the movers of the nodes no longer draining.
func (r *Reader) NewPass(nodes map[string]*api.NodeListStub, leaving []Leaving, headroom float64, groupOf map[string]string) *Pass {
	p := &Pass{nodes: nodes, allocs: map[string][]*api.Allocation{}, Gate: admission.Capacity{Headroom: headroom,
		Movers: map[string][]capacity.Alloc{}, Nodes: map[string]capacity.Node{}, Read: map[string]int{}, GroupOf: groupOf}}
	var out []string
	for _, l := range leaving {
		out = append(out, l.NodeID)
		if !l.Draining && capacity.EmptiedByDrain(nodes[l.NodeID]) {
			if p.Gate.Emptied == nil {
				p.Gate.Emptied = map[string]bool{}
			}
			p.Gate.Emptied[l.NodeID] = true
		}
	}
	slices.Sort(out)
	p.Gate.Candidates, p.Gate.Out = capacity.SortNodes(nodes, slices.Compact(out))
	r.nodes.Prune(nodes)
	r.movers.Retain(func(id string) bool { return keepsMovers(nodes[id]) })
	return p
}

// Read reads what the gate lacks (needs) into p. A read that fails is the
// gate's error (p.Gate.Err), after which nothing more is read in the pass:
// every queued host holds with it.
func (r *Reader) Read(ctx context.Context, p *Pass, needs admission.CapacityNeeds) {
	if p.Gate.Err == nil {
		p.Gate.Err = r.round(ctx, p, needs)
	}
}

// round reads what the gate lacked: the allocations of the nodes whose
// allocations would move, and twice as many candidates of the pools short of
// room.
func (r *Reader) round(ctx context.Context, p *Pass, needs admission.CapacityNeeds) error {
	var todo []string // the candidates this round reads, each once
	for _, id := range candidatesToRead(&p.Gate, needs.Pools) {
		if !slices.Contains(todo, id) {
			todo = append(todo, id)
		}
	}
	// The allocations and the nodes' details are read side by side: each
	// read waits its turn behind the others on a busy server, and the first
	// hand-out of a rollout waits for them while every agent writes its record.
	var (
		nodes            []capacity.Node
		allocErr, nodErr error
		wg               sync.WaitGroup
		slots            = make(chan struct{}, Parallelism) // the round's reads in flight, both kinds
	)
	wg.Go(func() { allocErr = r.readAllocsOf(ctx, p, append(slices.Clone(needs.Allocs), todo...), slots) })
	wg.Go(func() { nodes, nodErr = r.capacityNodes(ctx, p.nodes, todo, slots) })
	wg.Wait()
	if err := cmp.Or(allocErr, nodErr); err != nil {
		return err
	}
	for i, id := range todo {
		n := nodes[i]
		allocs, err := r.allocsOf(ctx, p, id) // read above (readAllocsOf)
		if err != nil {
			return err
		}
		n.Used, n.Running = capacity.Used(allocs), capacity.Running(allocs)
		p.Gate.Nodes[id] = n
	}
	for _, pool := range needs.Pools {
		p.Gate.Read[pool] = p.Gate.NextRead(pool)
	}
	return nil
}

// capacityNodes returns the capacity of the nodes ids: as kept at their
// ModifyIndex in nodes, the others read side by side (readNode), each holding
// one of slots (nil: Parallelism at once): a new leader knows none, and one
// after the other they took most of a second on a loaded machine before the
// first grant of a rollout. Only this runs on the kept capacities (round
// waits for it).
func (r *Reader) capacityNodes(ctx context.Context, nodes map[string]*api.NodeListStub, ids []string, slots chan struct{}) ([]capacity.Node, error) {
	out := make([]capacity.Node, len(ids))
	var todo []int
	for i, id := range ids {
		if n, ok := r.nodes.Get(id, nodes[id].ModifyIndex); ok {
			out[i] = n
			continue
		}
		todo = append(todo, i)
	}
	// After a failure no more is read: the pass holds every queued host with it.
	read, err := parallel.Map(len(todo), Parallelism, func(k int) (capacity.Node, error) {
		return holding(slots, func() (capacity.Node, error) { return r.readNode(ctx, ids[todo[k]]) })
	})
	if err != nil {
		return nil, err
	}
	for k, i := range todo {
		out[i] = read[k]
		r.nodes.Put(ids[i], nodes[ids[i]].ModifyIndex, read[k])
	}
	return out, nil
}

// readNode reads a node and returns its capacity: its resources less its
// reserved resources, its healthy devices, and what constraints interpolate
// on it (capacity.NodeOf).
func (r *Reader) readNode(ctx context.Context, id string) (capacity.Node, error) {
	n, _, err := r.Nodes.Info(id, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return capacity.Node{}, fmt.Errorf("read node %s: %w", id, err)
	}
	return capacity.NodeOf(n), nil
}

// allocsOf returns the allocations on a node, read once per pass.
func (r *Reader) allocsOf(ctx context.Context, p *Pass, nodeID string) ([]*api.Allocation, error) {
	if allocs, ok := p.allocs[nodeID]; ok {
		return allocs, nil
	}
	allocs, err := r.readOrInPass(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	p.allocs[nodeID] = allocs
	return allocs, nil
}

// readOrInPass is the allocations on a node as read earlier in the
// coordinator's pass (InPass), else read now (readAllocs).
func (r *Reader) readOrInPass(ctx context.Context, nodeID string) ([]*api.Allocation, error) {
	if r.InPass != nil {
		if allocs, ok := r.InPass(nodeID); ok {
			return allocs, nil
		}
	}
	return r.readAllocs(ctx, nodeID)
}

// readAllocs reads the allocations on a node, and tells AllocsRead.
func (r *Reader) readAllocs(ctx context.Context, nodeID string) ([]*api.Allocation, error) {
	allocs, meta, err := r.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read the allocations of node %s: %w", nodeID, err)
	}
	if r.AllocsRead != nil {
		r.AllocsRead(nodeID, meta, allocs)
	}
	return allocs, nil
}

// readAllocsOf reads, side by side, each read holding one of slots, the
// allocations of the nodes ids whose allocations this pass has not read yet,
// into p (an ID given twice is read once). A draining node's movers kept
// since an earlier pass are taken instead (movers.go).
func (r *Reader) readAllocsOf(ctx context.Context, p *Pass, ids []string, slots chan struct{}) error {
	var todo []string
	for _, id := range ids {
		if _, ok := p.allocs[id]; ok || slices.Contains(todo, id) {
			continue
		}
		if _, ok := p.kept[id]; ok {
			continue
		}
		if movers, ok := r.keptMovers(p.nodes, id); ok {
			if p.kept == nil {
				p.kept = map[string][]capacity.Alloc{}
			}
			p.kept[id] = movers
			continue
		}
		todo = append(todo, id)
	}
	// After a failure no more is read: the pass holds every queued host with it.
	got, err := parallel.Map(len(todo), Parallelism, func(i int) ([]*api.Allocation, error) {
		return holding(slots, func() ([]*api.Allocation, error) { return r.readOrInPass(ctx, todo[i]) })
	})
	if err != nil {
		return err
	}
	for i, id := range todo {
		p.allocs[id] = got[i]
		p.Gate.Movers[id] = capacity.Movers(got[i])
		r.keepMovers(p.nodes, id, p.Gate.Movers[id])
	}
	for id, movers := range p.kept { // again at each round: it may have read replacements
		p.Gate.Movers[id] = withoutReplaced(movers, p.allocs)
	}
	return nil
}

// candidatesToRead returns the candidates of pools whose allocations and
// details this round reads (round): those up to the next read of each pool
// (NextRead) not read yet.
func candidatesToRead(v *admission.Capacity, pools []string) []string {
	var ids []string
	for _, pool := range pools {
		for _, id := range v.Candidates[pool][:v.NextRead(pool)] {
			if _, ok := v.Nodes[id]; !ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// holding runs read holding one of slots (nil: none to hold), so that reads
// of several kinds side by side share one bound.
func holding[T any](slots chan struct{}, read func() (T, error)) (T, error) {
	if slots != nil {
		slots <- struct{}{}
		defer func() { <-slots }()
	}
	return read()
}

package admission

import (
	"cmp"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/phase"
)

// Capacity is what the capacity gate read in a pass: which nodes may take the
// allocations a drain moves, and what is on the nodes read. The gate asks for
// more (CapacityNeeds) until it can tell: the allocations of each node on its
// way out, and the candidates of a pool in a fixed order, twice as many each
// time, so that a check usually reads the host's node and one or two others.
type Capacity struct {
	Headroom float64
	// Candidates: by node pool, the nodes that may take allocations (ready,
	// eligible, not draining, not out for rollboot) in the order tried; "all":
	// every one of them.
	Candidates map[string][]string
	// Out: the nodes draining or on their way out for rollboot (sorted), whose
	// allocations need room; Emptied: those of them whose drain completed and
	// that nothing moves from any more.
	Out     []string
	Emptied map[string]bool
	// Movers: by node, the allocations read that a drain would move (present,
	// even empty, once read); Nodes: the candidates read.
	Movers map[string][]capacity.Alloc
	Nodes  map[string]capacity.Node
	// Read: by pool, how many of its candidates were read.
	Read map[string]int
	// GroupOf: each node's group.
	GroupOf map[string]string
	// Err: a read failed: every host the gate looks at is held with it.
	Err error
}

// CapacityNeeds is what the capacity gate lacks.
type CapacityNeeds struct {
	// Allocs: the nodes whose allocations are not read yet.
	Allocs []string
	// Pools: the pools whose next candidates are to be read (NextRead).
	Pools []string
	// Layout: the pass's layout of the nodes (Capacity without any read:
	// its candidates and the nodes out), to check a kept hold against.
	Layout bool
}

// None reports whether the gate lacks nothing.
func (n CapacityNeeds) None() bool { return len(n.Allocs) == 0 && len(n.Pools) == 0 && !n.Layout }

func (n *CapacityNeeds) add(m CapacityNeeds) {
	for _, id := range m.Allocs {
		if !slices.Contains(n.Allocs, id) {
			n.Allocs = append(n.Allocs, id)
		}
	}
	for _, p := range m.Pools {
		if !slices.Contains(n.Pools, p) {
			n.Pools = append(n.Pools, p)
		}
	}
	slices.Sort(n.Allocs)
	slices.Sort(n.Pools)
	n.Layout = n.Layout || m.Layout
}

// CapacityHold is a hold of the capacity gate kept from an earlier pass: the
// host found no room (Why) for its drain's allocations, whose pools are Pools,
// with the nodes laid out as Layout says (Capacity.layout). Until Until, and
// while the layout stays the same, it stands without a read: room comes from a
// node joining the candidates or leaving the nodes out, which changes the
// layout, or from allocations ending elsewhere, which nothing in Nomad's node
// list shows and the recheck (CapacityRecheck) finds. Only a hold is kept, never
// a grant: the gate's reads decide every drain.
type CapacityHold struct {
	Why    phase.WaitReason
	Pools  []string
	Layout uint64
	Until  time.Time
}

// layout digests what a kept hold's verdict depends on in Nomad's node list:
// the candidates of the pools its movers go to, in order, and the nodes out,
// with those a drain emptied.
func (v *Capacity) layout(pools []string) uint64 {
	h := fnv.New64a()
	word := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, p := range pools {
		word("pool " + p)
		for _, id := range v.Candidates[p] {
			word(id)
		}
	}
	word("out")
	for _, id := range v.Out {
		word(id)
		if v.Emptied[id] {
			word("emptied")
		}
	}
	return h.Sum64()
}

// moverPools are the pools movers go to ("all" for those without one).
func moverPools(movers []capacity.Alloc) []string {
	var pools []string
	for _, m := range movers {
		p := cmp.Or(m.Pool, "all")
		if !slices.Contains(pools, p) {
			pools = append(pools, p)
		}
	}
	slices.Sort(pools)
	return pools
}

// NextRead is how many candidates of pool are read once the next read of the
// pool is done: twice as many as before, at least two.
func (v *Capacity) NextRead(pool string) int {
	return min(len(v.Candidates[pool]), max(2, 2*v.Read[pool]))
}

// gate says why the host on node may not be drained now for lack of room (zero
// when it may), with the nodes of the hosts admitted before it leaving too;
// what it lacks to tell; and, when it read all it could and found no room,
// the pools the drain's allocations go to (settled: a hold to keep). lacking
// counts, by group, the hosts held so far in this admission for what the gate
// lacks; free is how many hosts of node's group could start in it.
func (v *Capacity) gate(node string, admitted []string, lacking map[string]int, free int) (why phase.WaitReason, needs CapacityNeeds, settled []string) {
	if v.Err != nil {
		return phase.WaitFor(phase.WaitCapacity, "cannot tell: "+v.Err.Error()), needs, nil
	}
	if _, ok := v.Movers[node]; !ok && v.askedEnough(node, lacking, free) {
		return phase.WaitFor(phase.WaitCapacity, "its allocations are not read yet"), needs, nil
	}
	leaving := append(slices.Clone(v.Out), admitted...)
	leaving = append(leaving, node)
	gone := map[string]bool{node: true}
	for _, id := range admitted {
		gone[id] = true
	}
	in := capacity.Input{Headroom: v.Headroom}
	in.Movers, needs.Allocs = v.moversOf(leaving, gone)
	if len(needs.Allocs) > 0 {
		lacking[v.GroupOf[node]]++
		return phase.WaitFor(phase.WaitCapacity, "its allocations are not read yet"), needs, nil
	}
	// The candidates read, in the order of all of them (by ID).
	for _, id := range slices.Sorted(maps.Keys(v.Nodes)) {
		if !gone[id] {
			in.Candidates = append(in.Candidates, v.Nodes[id])
		}
	}
	short := capacity.Check(in)
	if short == "" {
		return phase.WaitReason{}, needs, nil
	}
	needs.Pools = v.poolsToRead(in.Movers)
	if len(needs.Pools) > 0 {
		lacking[v.GroupOf[node]]++
		return phase.WaitFor(phase.WaitCapacity, "more nodes to read"), needs, nil
	}
	return phase.WaitFor(phase.WaitCapacity, short), needs, moverPools(in.Movers)
}

// askedEnough reports whether this admission already holds as many hosts of
// node's group for what the gate lacks as the group has slots free in it
// (free), or as it has read nodes of that group, whichever is more (at least
// one): then the host waits for a later read instead of asking for its
// allocations too. A host the gate holds gives its slot to the next in line,
// and one whose allocations are not read yet is held: without this bound the
// first read asked for the allocations of every queued host of a group with a
// slot free (hundreds, when every host asked at once), though a slot goes to
// the first that fits. Bounded by the reads alone, a group with k slots free
// (a wave of closes) asked for one more host's allocations at each round of
// reads, its k-th host granted rounds after the first.
func (v *Capacity) askedEnough(node string, lacking map[string]int, free int) bool {
	group := v.GroupOf[node]
	read := 0
	for id := range v.Movers {
		if _, out := slices.BinarySearch(v.Out, id); !out && v.GroupOf[id] == group {
			read++
		}
	}
	return lacking[group] >= max(1, read, free)
}

// moversOf returns the allocations that the drains of the nodes ids move (none
// for a node its drain emptied, unless gone says it leaves now), and the
// nodes whose allocations are not read yet.
func (v *Capacity) moversOf(ids []string, gone map[string]bool) (movers []capacity.Alloc, unread []string) {
	for _, id := range ids {
		if v.Emptied[id] && !gone[id] {
			continue // nothing on it moves
		}
		m, ok := v.Movers[id]
		if !ok {
			unread = append(unread, id)
			continue
		}
		movers = append(movers, m...)
	}
	return movers, unread
}

// poolsToRead are the pools of movers that have candidates not read yet: a
// check that finds no room reads more of them before it says so.
func (v *Capacity) poolsToRead(movers []capacity.Alloc) []string {
	var pools []string
	for _, m := range movers {
		p := cmp.Or(m.Pool, "all")
		if v.Read[p] < len(v.Candidates[p]) && !slices.Contains(pools, p) {
			pools = append(pools, p)
		}
	}
	return pools
}

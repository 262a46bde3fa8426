package admission

import (
	"maps"
	"slices"

	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// Cordons (the policy's node_meta.cordon_next): the hosts at the head of
// each group's line, after the hosts admitted now, whose node is marked
// ineligible before their drain, so that what the drains before them move does
// not land there and move twice. Only a host that waits for a slot and nothing
// else is cordoned (a paused group, a closed window, an alert, a gate: no drain
// is near), and only while the capacity gate says the nodes left can take what
// the nodes out and the hosts admitted now move without its node and the nodes
// cordoned before it. Decided from the plans and Nomad's nodes and allocations
// alone, never from a host record.

// cordons fills the result's Cordon and NoCordon; what the capacity gate
// lacks to tell is noted in the needs.
func (a *admitter) cordons() {
	n := a.in.Rules.CordonNext
	if n <= 0 {
		return
	}
	var line []policy.Request
	for _, p := range a.in.Queue {
		if !a.out.Admitted[p.Host] {
			line = append(line, p.Request)
		}
	}
	next := policy.NextInLine(line, n)
	held := capacityHeld(a.out.Wait)
	var cordoned []string // the nodes cordoned so far, in line order
	for _, r := range policy.InQueueOrder(line) {
		p := a.pending(r.Host)
		if !next[r.Host] || p.Node == nil || a.out.Cordon[r.Host] || a.out.Wait[r.Host].Kind != phase.WaitQueued {
			continue
		}
		if why := a.noRoomFor(p, cordoned, held); why != "" {
			a.out.NoCordon[r.Host] = why
			continue
		}
		a.out.Cordon[r.Host] = true
		cordoned = append(cordoned, p.Node.ID)
	}
}

// capacityHeld names a host the capacity gate holds in this admission ("":
// none). A cordon then spares nothing: its node may be the room that host
// needs, so every cordon waits until the gate lets that host go.
func capacityHeld(wait map[string]phase.WaitReason) string {
	var held []string
	for host, why := range wait {
		if why.Kind == phase.WaitCapacity {
			held = append(held, host)
		}
	}
	if len(held) == 0 {
		return ""
	}
	return slices.Min(held)
}

// noRoomFor says why p's node may not be cordoned for lack of room ("" when it
// may).
func (a *admitter) noRoomFor(p Pending, cordoned []string, held string) string {
	switch {
	case !a.in.Rules.Capacity:
		return "the capacity gate is off: with capacity { enabled = true } rollboot can tell whether the other nodes can spare this one"
	case held != "":
		return "the capacity gate holds " + held
	}
	v := a.in.Capacity
	if v == nil {
		pool := p.Pool
		if pool == "" {
			pool = "all"
		}
		a.needs.Capacity.add(CapacityNeeds{Pools: []string{pool}}) // sorts the nodes first
		return "the nodes are not read yet"
	}
	why, needs := v.spare(p.Node.ID, a.admitted, cordoned)
	a.needs.Capacity.add(needs)
	if why != "" {
		a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, a.in.Now.Add(CapacityRecheck))
	}
	return why
}

// spare says why the nodes left cannot spare node ("" when they can): the
// allocations of the nodes out (but those their drain emptied) and of the
// nodes admitted now must fit on the candidates read without node, the
// admitted ones and those cordoned; and what it lacks to tell. A node
// cordoned already is no candidate (it is ineligible), so its cordon is kept
// exactly while the others still have room without it.
func (v *Capacity) spare(node string, admitted, cordoned []string) (string, CapacityNeeds) {
	var needs CapacityNeeds
	if v.Err != nil {
		return "cannot tell: " + v.Err.Error(), needs
	}
	gone := map[string]bool{node: true}
	for _, id := range append(slices.Clone(admitted), cordoned...) {
		gone[id] = true
	}
	in := capacity.Input{Headroom: v.Headroom}
	leavesNow := map[string]bool{}
	for _, id := range admitted {
		leavesNow[id] = true
	}
	in.Movers, needs.Allocs = v.moversOf(append(slices.Clone(v.Out), admitted...), leavesNow)
	if len(needs.Allocs) > 0 {
		return "the allocations of the nodes out are not read yet", needs
	}
	for _, id := range slices.Sorted(maps.Keys(v.Nodes)) {
		if !gone[id] {
			in.Candidates = append(in.Candidates, v.Nodes[id])
		}
	}
	why := capacity.Check(in)
	if why == "" {
		return "", needs
	}
	needs.Pools = v.poolsToRead(in.Movers)
	if len(needs.Pools) > 0 {
		return "more nodes to read", needs
	}
	return "the other nodes cannot spare it: " + why, needs
}

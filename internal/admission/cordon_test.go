package admission

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/policy"
)

// node is a candidate of pool "default" with mem MiB free.
func node(name string, mem int64) capacity.Node {
	return capacity.Node{Name: name, Pool: "default", Capacity: capacity.Resources{CPU: 10000, MemoryMB: mem}}
}

// allocs are n allocations of mem MiB each, placed anywhere.
func allocs(n int, mem int64) []capacity.Alloc {
	var out []capacity.Alloc
	for i := range n {
		out = append(out, capacity.Alloc{Name: "web[" + string(rune('0'+i)) + "]", Ask: capacity.Resources{CPU: 100, MemoryMB: mem}})
	}
	return out
}

// view is what the capacity gate read: node-out out (draining) with movers,
// and the candidates, all read.
func view(movers []capacity.Alloc, candidates ...capacity.Node) *Capacity {
	v := &Capacity{Out: []string{"node-out"}, Movers: map[string][]capacity.Alloc{"node-out": movers},
		Nodes: map[string]capacity.Node{}, Read: map[string]int{}, Candidates: map[string][]string{}}
	for _, n := range candidates {
		v.Nodes[n.Name] = n
		v.Candidates["default"] = append(v.Candidates["default"], n.Name)
		v.Candidates["all"] = append(v.Candidates["all"], n.Name)
		v.Movers[n.Name] = nil // read: nothing on it
	}
	v.Read["default"], v.Read["all"] = len(candidates), len(candidates)
	return v
}

// Which hosts next in line have their node cordoned: those at the head of
// their group's line, after the hosts admitted now, that wait only for a
// slot, while the nodes left can take what the nodes out and the hosts
// admitted move without theirs.
func TestCordons(t *testing.T) {
	// queued: a, b and c wait for the group's one slot, taken by node-out.
	queued := func(n int) Input {
		in := input(1, pending("a", 0), pending("b", 1), pending("c", 2))
		in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, Active: 1}
		in.Rules.CordonNext, in.Rules.Capacity = n, true
		return in
	}
	tests := []struct {
		name     string
		in       func() Input
		needs    Needs
		cordon   []string
		noCordon map[string]string // host: a part of why
	}{
		{name: "off", in: func() Input {
			in := queued(0)
			in.Capacity = view(allocs(1, 512), node("node-a", 1024), node("node-x", 1024))
			return in
		}},
		{name: "the first in line, the others have room", in: func() Input {
			in := queued(1)
			in.Capacity = view(allocs(1, 512), node("node-a", 1024), node("node-x", 1024))
			return in
		}, cordon: []string{"a"}},
		{name: "nothing out: nothing moves, room enough", in: func() Input {
			in := queued(2)
			in.Capacity = view(nil)
			return in
		}, cordon: []string{"a", "b"}},
		{name: "the others cannot spare it", in: func() Input {
			in := queued(1)
			in.Capacity = view(allocs(2, 768), node("node-a", 1024), node("node-x", 1024))
			return in
		}, noCordon: map[string]string{"a": "cannot spare it"}},
		{name: "room for one cordon of two: the first in line", in: func() Input {
			in := queued(2)
			in.Capacity = view(allocs(2, 768), node("node-a", 1024), node("node-b", 1024), node("node-x", 1024), node("node-y", 1024))
			in.Capacity.Movers["node-out"] = allocs(3, 768)
			return in
		}, cordon: []string{"a"}, noCordon: map[string]string{"b": "cannot spare it"}},
		{name: "a host admitted now is not next, its allocations need room", in: func() Input {
			in := queued(1)
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10}
			in.Capacity = view(nil, node("node-a", 1024), node("node-b", 1024), node("node-x", 1024))
			in.Capacity.Movers["node-a"] = allocs(2, 768)
			return in
		}, noCordon: map[string]string{"b": "cannot spare it"}},
		{name: "a paused group: no drain is near", in: func() Input {
			in := queued(1)
			in.Paused = true
			in.Capacity = view(nil)
			return in
		}},
		{name: "the capacity gate off: no cordon, and why", in: func() Input {
			in := queued(1)
			in.Rules.Capacity = false
			return in
		}, noCordon: map[string]string{"a": "capacity { enabled = true }"}},
		{name: "the capacity gate holds a host: no cordon anywhere", in: func() Input {
			in := queued(2)
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10}
			in.Capacity = view(nil, node("node-b", 1024), node("node-c", 1024))
			in.Capacity.Movers["node-a"] = allocs(3, 1024) // never fits: a is held, b admitted
			in.Capacity.Movers["node-b"] = nil
			return in
		}, noCordon: map[string]string{"c": "the capacity gate holds a"}},
		{name: "a failed read: cannot tell", in: func() Input {
			in := queued(1)
			in.Capacity = &Capacity{Err: errors.New("read node x: 500")}
			return in
		}, noCordon: map[string]string{"a": "cannot tell: read node x: 500"}},
		{name: "nothing read yet: the nodes first", in: func() Input {
			return queued(1)
		}, needs: Needs{Capacity: CapacityNeeds{Pools: []string{"default"}}}},
		{name: "then the allocations of the nodes out", in: func() Input {
			in := queued(1)
			in.Capacity = view(nil, node("node-x", 1024))
			delete(in.Capacity.Movers, "node-out")
			return in
		}, needs: Needs{Capacity: CapacityNeeds{Allocs: []string{"node-out"}}}},
		{name: "then more candidates", in: func() Input {
			in := queued(1)
			in.Capacity = view(allocs(1, 768), node("node-a", 1024), node("node-x", 512))
			in.Capacity.Candidates["all"] = append(in.Capacity.Candidates["all"], "node-y")
			return in
		}, needs: Needs{Capacity: CapacityNeeds{Pools: []string{"all"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, needs := Admit(tt.in())
			if !equalNeeds(needs, tt.needs) {
				t.Fatalf("needs %+v, want %+v", needs, tt.needs)
			}
			if !needs.None() {
				return
			}
			if got := slices.Sorted(maps.Keys(res.Cordon)); !slices.Equal(got, tt.cordon) {
				t.Errorf("cordon %v, want %v (no cordon: %v; waits: %v)", got, tt.cordon, res.NoCordon, res.Wait)
			}
			for h, want := range tt.noCordon {
				if !strings.Contains(res.NoCordon[h], want) {
					t.Errorf("no cordon for %s: %q, want it to say %q", h, res.NoCordon[h], want)
				}
			}
			for h := range res.NoCordon {
				if _, ok := tt.noCordon[h]; !ok {
					t.Errorf("no cordon for %s: %q, want none said", h, res.NoCordon[h])
				}
			}
		})
	}
}

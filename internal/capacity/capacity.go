// Package capacity decides whether the allocations a drain would move have
// somewhere to go: the capacity gate of admission (docs/configuration.md,
// "capacity"). It is pure: the coordinator reads the nodes and allocations
// (package capacityread) and hands them over as plain values, which
// nomad.go takes from Nomad's API types.
//
// The estimate follows how Nomad's scheduler counts a node's room (nomad/structs
// funcs.go AllocsFit: the node's resources less its reserved resources, less the
// resources of the allocations on it that its client has not stopped) and places the
// allocations first-fit decreasing over the candidate nodes, each in its job's
// node pool and datacenters and on a node that meets its job's, group's and
// tasks' constraints (package constraint, as the scheduler's
// ConstraintChecker), and not beside an allocation its distinct_hosts
// constraints exclude (as the scheduler's DistinctHostsIterator). Bin packing by
// first-fit decreasing can fail where the scheduler would succeed, rarely; the
// other way round it sees no spread, affinity, distinct_property, port, host
// volume or CSI volume, nor preemption: a job the scheduler cannot place for
// those reasons passes here.
package capacity

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/constraint"
)

// Resources are an amount of each resource the gate counts.
type Resources struct {
	CPU      int64 // MHz (CpuShares)
	MemoryMB int64 // MiB (Nomad calls it MB)
	// Devices counts device instances by "vendor/type/name".
	Devices map[string]int
}

// Node is a node the allocations may move to.
type Node struct {
	Name       string // for messages
	Pool       string // Node.NodePool
	Datacenter string
	// Capacity is what allocations may use: NodeResources less
	// ReservedResources, and the healthy device instances.
	Capacity Resources
	// Used is the sum of the resources of the node's allocations that are not
	// terminal.
	Used Resources
	// Targets are what constraints interpolate on the node: its attributes,
	// meta, class, ...
	Targets constraint.Node
	// Running are the groups of the allocations on the node that are not
	// terminal, once each, for distinct_hosts (read only: shared between
	// checks).
	Running []Group
}

// Group is a job's task group in a namespace.
type Group struct{ Namespace, Job, Group string }

// Alloc is an allocation that must move.
type Alloc struct {
	// ID is the allocation's ID: a migration's replacement names it as its
	// PreviousAllocation.
	ID   string
	Name string // "job.group[2]", for messages
	// Pool is its job's node pool; "" or "all": any.
	Pool string
	// Datacenters are its job's datacenters, globs with "*"; none: any.
	Datacenters []string
	// Job is its job's ID; Namespace and Group place it for distinct_hosts.
	Job, Namespace, Group string
	// Constraints are its job's, its group's and its tasks' constraints.
	Constraints []constraint.Constraint
	// Distinct are its job's and group's distinct_hosts constraints.
	Distinct constraint.Distinct
	Ask      Resources
}

// Input is what the gate decides on.
type Input struct {
	// Headroom is the share of each node's capacity kept free, in [0, 1).
	Headroom float64
	// Candidates are the nodes that may take allocations, in the order they
	// are tried: ready, eligible, not draining, not taken out in this pass.
	Candidates []Node
	// Movers are the allocations that need room elsewhere: those of the nodes
	// already draining, of the hosts admitted before in the same pass, and of
	// the host itself (system jobs' never move).
	Movers []Alloc
}

// Check says why the movers do not fit on the candidates ("" when they do).
func Check(in Input) string {
	free := make([]Resources, len(in.Candidates))
	for i, n := range in.Candidates {
		free[i] = n.free(in.Headroom)
	}
	movers := slices.Clone(in.Movers)
	slices.SortStableFunc(movers, func(a, b Alloc) int {
		if c := cmp.Compare(b.Ask.MemoryMB, a.Ask.MemoryMB); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Ask.CPU, a.Ask.CPU); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	// placed: the movers placed on each candidate so far, for distinct_hosts.
	placed := make([][]Group, len(in.Candidates))
	remember := hasDistinct(movers)
	for _, a := range movers {
		ok := false
		for i, n := range in.Candidates {
			if a.mayRunOn(n) && a.Ask.within(free[i]) && !a.collides(n.Running) && !a.collides(placed[i]) {
				free[i] = free[i].minus(a.Ask)
				if remember {
					placed[i] = append(placed[i], a.group())
				}
				ok = true
				break
			}
		}
		if !ok {
			return shortage(in, a, placed)
		}
	}
	return ""
}

// hasDistinct reports whether any mover has a distinct_hosts constraint (only
// then do placements need remembering).
func hasDistinct(movers []Alloc) bool {
	return slices.ContainsFunc(movers, func(m Alloc) bool { return m.Distinct.Any() })
}

func (a Alloc) group() Group { return Group{a.Namespace, a.Job, a.Group} }

// collides reports whether a's distinct_hosts constraints keep it off a node
// with allocations of these groups.
func (a Alloc) collides(on []Group) bool {
	if !a.Distinct.Any() {
		return false
	}
	return slices.ContainsFunc(on, func(g Group) bool {
		return a.Distinct.Collides(a.Namespace, a.Job, a.Group, g.Namespace, g.Job, g.Group)
	})
}

// shortage says why a fits nowhere: that its constraints exclude every
// candidate of its pool, or what all the allocations placed as it is need
// against what the nodes they may run on have free, or, when the sums would do,
// that no single node has room for it.
func shortage(in Input, a Alloc, placed [][]Group) string {
	where := "pool " + poolName(a.Pool)
	if dcs := a.Datacenters; len(dcs) > 0 && !slices.Equal(dcs, []string{"*"}) {
		where += " in datacenters " + strings.Join(dcs, ",")
	}
	var free Resources
	met := 0
	excluded := map[string]int{} // by the first constraint a node fails
	for i, n := range in.Candidates {
		if !a.inPlace(n) {
			continue
		}
		if c, ok := constraint.First(a.Constraints, n.Targets); !ok {
			excluded[strings.TrimSpace(c.String())]++
			continue
		}
		if a.collides(n.Running) || a.collides(placed[i]) {
			excluded[api.ConstraintDistinctHosts]++
			continue
		}
		met++
		free = free.plus(n.free(in.Headroom))
	}
	var need Resources
	var same int
	for _, m := range in.Movers {
		if m.Pool == a.Pool && slices.Equal(m.Datacenters, a.Datacenters) && slices.Equal(m.Constraints, a.Constraints) {
			need = need.plus(m.Ask)
			if m.Job == a.Job {
				same++
			}
		}
	}
	if len(excluded) > 0 {
		if met == 0 {
			return fmt.Sprintf("%s: no eligible node satisfies the constraints of job %s (%s): %s",
				where, a.jobName(), count(same, "allocation"), exclusions(excluded))
		}
		where += ", on the nodes meeting the constraints of job " + a.jobName()
	}
	switch {
	case need.MemoryMB > free.MemoryMB:
		return fmt.Sprintf("%s: needs %s memory, %s free", where, mib(need.MemoryMB), mib(free.MemoryMB))
	case need.CPU > free.CPU:
		return fmt.Sprintf("%s: needs %d MHz CPU, %d MHz free", where, need.CPU, free.CPU)
	}
	for _, d := range sortedKeys(need.Devices) {
		if need.Devices[d] > free.Devices[d] {
			return fmt.Sprintf("%s: needs %d %s devices, %d free", where, need.Devices[d], d, free.Devices[d])
		}
	}
	return fmt.Sprintf("%s: %s needs %s on one node, and no node has that much free", where, a.Name, a.Ask)
}

// free is what the node has left once headroom is kept (never negative).
func (n Node) free(headroom float64) Resources {
	keep := func(v int64) int64 { return v - int64(float64(v)*headroom) }
	f := Resources{CPU: max(0, keep(n.Capacity.CPU)-n.Used.CPU), MemoryMB: max(0, keep(n.Capacity.MemoryMB)-n.Used.MemoryMB)}
	for d, c := range n.Capacity.Devices {
		if left := c - n.Used.Devices[d]; left > 0 {
			if f.Devices == nil {
				f.Devices = map[string]int{}
			}
			f.Devices[d] = left
		}
	}
	return f
}

// mayRunOn reports whether the allocation may be placed on n: in its job's
// node pool and datacenters, and n meets its constraints.
func (a Alloc) mayRunOn(n Node) bool {
	if !a.inPlace(n) {
		return false
	}
	_, ok := constraint.First(a.Constraints, n.Targets)
	return ok
}

// inPlace reports whether n is in the allocation's job's node pool and
// datacenters (scheduler/util.go readyNodesInDCsAndPool, with
// structs.Node.IsInPool and IsInAnyDC). A job always has datacenters (["*"] by
// default); none here means any.
func (a Alloc) inPlace(n Node) bool {
	if a.Pool != "" && a.Pool != "all" && a.Pool != n.Pool {
		return false
	}
	if len(a.Datacenters) == 0 {
		return true
	}
	return slices.ContainsFunc(a.Datacenters, func(g string) bool { return globMatch(g, n.Datacenter) })
}

// globMatch matches s against a pattern where "*" stands for any run of
// characters, as Nomad matches job datacenters (IsInAnyDC, since 1.5).
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func (r Resources) within(f Resources) bool {
	if r.CPU > f.CPU || r.MemoryMB > f.MemoryMB {
		return false
	}
	for d, c := range r.Devices {
		if c > f.Devices[d] {
			return false
		}
	}
	return true
}

func (r Resources) plus(o Resources) Resources { return r.Add(o) }

func (r Resources) minus(o Resources) Resources { return r.add(o, -1) }

func (r Resources) add(o Resources, sign int) Resources {
	out := Resources{CPU: r.CPU + int64(sign)*o.CPU, MemoryMB: r.MemoryMB + int64(sign)*o.MemoryMB}
	if len(r.Devices)+len(o.Devices) > 0 {
		out.Devices = map[string]int{}
		for d, c := range r.Devices {
			out.Devices[d] = c
		}
		for d, c := range o.Devices {
			out.Devices[d] += sign * c
		}
	}
	return out
}

// Add returns r plus o.
func (r Resources) Add(o Resources) Resources { return r.add(o, 1) }

// String is the amount as shown in a reason: "500 MHz CPU, 1 GiB memory, 1
// nvidia/gpu/T4".
func (r Resources) String() string {
	parts := []string{fmt.Sprintf("%d MHz CPU", r.CPU), mib(r.MemoryMB) + " memory"}
	for _, d := range sortedKeys(r.Devices) {
		if r.Devices[d] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", r.Devices[d], d))
		}
	}
	return strings.Join(parts, ", ")
}

// mib shows an amount of MiB in GiB from 1 GiB on, one decimal at most ("6
// GiB", "1.5 GiB").
func mib(v int64) string {
	if v < 1024 && v > -1024 {
		return strconv.FormatInt(v, 10) + " MiB"
	}
	return strings.TrimSuffix(strconv.FormatFloat(float64(v)/1024, 'f', 1, 64), ".0") + " GiB"
}

func (a Alloc) jobName() string {
	if a.Job != "" {
		return a.Job
	}
	return a.Name
}

// exclusions lists the constraints that excluded nodes, most nodes first, as
// Nomad's placement failures count them (AllocMetric.ConstraintFiltered):
// `"${meta.rack} != r2" excluded 3 nodes`.
func exclusions(excluded map[string]int) string {
	keys := sortedKeys(excluded)
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(excluded[b], excluded[a]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("\"%s\" excluded %s", k, count(excluded[k], "node"))
	}
	return strings.Join(parts, ", ")
}

// count is "1 node", "3 nodes".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func poolName(p string) string {
	if p == "" {
		return "all"
	}
	return p
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

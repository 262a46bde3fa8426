package capacity

import (
	"testing"

	"github.com/rollboot/rollboot/internal/constraint"
)

func node(name, pool, dc string, cpu, mem, usedCPU, usedMem int64) Node {
	return Node{Name: name, Pool: pool, Datacenter: dc, Capacity: Resources{CPU: cpu, MemoryMB: mem},
		Used: Resources{CPU: usedCPU, MemoryMB: usedMem}}
}

func alloc(name, pool string, cpu, mem int64) Alloc {
	return Alloc{Name: name, Pool: pool, Ask: Resources{CPU: cpu, MemoryMB: mem}}
}

func TestCheck(t *testing.T) {
	gpu := func(a Alloc, n int) Alloc { a.Ask.Devices = map[string]int{"nvidia/gpu/T4": n}; return a }
	gpuNode := func(n Node, have, used int) Node {
		n.Capacity.Devices = map[string]int{"nvidia/gpu/T4": have}
		n.Used.Devices = map[string]int{"nvidia/gpu/T4": used}
		return n
	}
	dcs := func(a Alloc, d ...string) Alloc { a.Datacenters = d; return a }
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{name: "nothing to move", in: Input{}, want: ""},
		{name: "fits", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 1000, 2048)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 1000, 4096)},
		}},
		{name: "memory short in the pool", in: Input{
			Candidates: []Node{node("b", "batch", "dc1", 4000, 8192, 0, 6144)},
			Movers:     []Alloc{alloc("etl.etl[0]", "batch", 100, 3072), alloc("etl.etl[1]", "batch", 100, 3072)},
		}, want: "pool batch: needs 6 GiB memory, 2 GiB free"},
		{name: "cpu short in the pool", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 3500, 0)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 1000, 100)},
		}, want: "pool default: needs 1000 MHz CPU, 500 MHz free"},
		{name: "reserved capacity is not free (capacity given net)", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 1000, 1024, 0, 0)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 100, 1536)},
		}, want: "pool default: needs 1.5 GiB memory, 1 GiB free"},
		{name: "other pools do not count", in: Input{
			Candidates: []Node{node("b", "gpu", "dc1", 4000, 8192, 0, 0)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 100, 512)},
		}, want: "pool default: needs 512 MiB memory, 0 MiB free"},
		{name: "a job in pool all goes anywhere", in: Input{
			Candidates: []Node{node("b", "gpu", "dc1", 4000, 8192, 0, 0)},
			Movers:     []Alloc{alloc("web.web[0]", "all", 100, 512)},
		}},
		{name: "datacenters restrict", in: Input{
			Candidates: []Node{node("b", "default", "dc2", 4000, 8192, 0, 0)},
			Movers:     []Alloc{dcs(alloc("web.web[0]", "default", 100, 512), "dc1")},
		}, want: "pool default in datacenters dc1: needs 512 MiB memory, 0 MiB free"},
		{name: "datacenter globs", in: Input{
			Candidates: []Node{node("b", "default", "eu-west-2", 4000, 8192, 0, 0)},
			Movers:     []Alloc{dcs(alloc("web.web[0]", "default", 100, 512), "us-*", "eu-*-2")},
		}},
		{name: "bin packing: enough in sum, too little on any node", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 4096, 0, 2048), node("c", "default", "dc1", 4000, 4096, 0, 2048)},
			Movers:     []Alloc{alloc("db.db[0]", "default", 500, 3072)},
		}, want: "pool default: db.db[0] needs 500 MHz CPU, 3 GiB memory on one node, and no node has that much free"},
		{name: "first-fit decreasing packs what first-fit in order would not", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 4096, 0, 0), node("c", "default", "dc1", 4000, 4096, 0, 0)},
			Movers: []Alloc{alloc("a.a[0]", "default", 10, 1024), alloc("a.a[1]", "default", 10, 1024),
				alloc("big.big[0]", "default", 10, 3072), alloc("big.big[1]", "default", 10, 3072)},
		}},
		{name: "movers of nodes draining and admitted before take the room", in: Input{
			Candidates: []Node{node("c", "default", "dc1", 4000, 8192, 0, 4096)},
			Movers: []Alloc{alloc("draining.x[0]", "default", 100, 2048), alloc("admitted.y[0]", "default", 100, 2048),
				alloc("self.z[0]", "default", 100, 1024)},
		}, want: "pool default: needs 5 GiB memory, 4 GiB free"},
		{name: "headroom keeps a share free", in: Input{
			Headroom:   0.25,
			Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 0, 4096)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 100, 3072)},
		}, want: "pool default: needs 3 GiB memory, 2 GiB free"},
		{name: "headroom zero uses everything", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 0, 4096)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 4000, 4096)},
		}},
		{name: "an overcommitted node offers nothing", in: Input{
			Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 5000, 9000)},
			Movers:     []Alloc{alloc("web.web[0]", "default", 1, 1)},
		}, want: "pool default: needs 1 MiB memory, 0 MiB free"},
		{name: "devices fit", in: Input{
			Candidates: []Node{gpuNode(node("b", "gpu", "dc1", 4000, 8192, 0, 0), 2, 1)},
			Movers:     []Alloc{gpu(alloc("train.t[0]", "gpu", 100, 512), 1)},
		}},
		{name: "devices short", in: Input{
			Candidates: []Node{gpuNode(node("b", "gpu", "dc1", 4000, 8192, 0, 0), 2, 1)},
			Movers:     []Alloc{gpu(alloc("train.t[0]", "gpu", 100, 512), 2)},
		}, want: "pool gpu: needs 2 nvidia/gpu/T4 devices, 1 free"},
		{name: "devices on a node without them", in: Input{
			Candidates: []Node{node("b", "gpu", "dc1", 4000, 8192, 0, 0)},
			Movers:     []Alloc{gpu(alloc("train.t[0]", "gpu", 100, 512), 1)},
		}, want: "pool gpu: needs 1 nvidia/gpu/T4 devices, 0 free"},
		{name: "no candidates", in: Input{
			Movers: []Alloc{alloc("web.web[0]", "", 100, 2048)},
		}, want: "pool all: needs 2 GiB memory, 0 MiB free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.in); got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckDoesNotChangeInput(t *testing.T) {
	in := Input{Candidates: []Node{node("b", "default", "dc1", 4000, 8192, 0, 0)},
		Movers: []Alloc{alloc("a.a[0]", "default", 10, 1024), alloc("b.b[0]", "default", 10, 2048)}}
	Check(in)
	if in.Movers[0].Name != "a.a[0]" || in.Candidates[0].Used.MemoryMB != 0 {
		t.Errorf("input changed: %+v", in)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "dc1", true}, {"dc1", "dc1", true}, {"dc1", "dc2", false}, {"dc*", "dc2", true},
		{"*-2", "eu-west-2", true}, {"eu-*-2", "eu-west-1", false}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false},
	} {
		if got := globMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
}

// The movers go only to nodes that meet their constraints; the reason tells
// constraints from room.
func TestCheckConstraints(t *testing.T) {
	rack := func(n Node, r string) Node {
		n.Targets = constraint.Node{Name: n.Name, Pool: n.Pool, Datacenter: n.Datacenter,
			Attributes: map[string]string{"kernel.name": "linux"}}
		if r != "" {
			n.Targets.Meta = map[string]string{"rack": r}
		}
		return n
	}
	notR2 := constraint.Constraint{LTarget: "${meta.rack}", Operand: "!=", RTarget: "r2"}
	isR1 := constraint.Constraint{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1"}
	linux := constraint.Constraint{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}
	with := func(a Alloc, job string, cs ...constraint.Constraint) Alloc { a.Job, a.Constraints = job, cs; return a }
	roomy := func(name, r string) Node { return rack(node(name, "default", "dc1", 4000, 8192, 0, 0), r) }
	full := func(name, r string) Node { return rack(node(name, "default", "dc1", 4000, 8192, 0, 7680), r) }
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{name: "a node meeting the constraints has room", in: Input{
			Candidates: []Node{roomy("b", "r2"), roomy("c", "r1")},
			Movers:     []Alloc{with(alloc("web.web[0]", "default", 100, 2048), "web", notR2)},
		}},
		{name: "a missing meta key is the empty value: != is met", in: Input{
			Candidates: []Node{roomy("b", "")},
			Movers:     []Alloc{with(alloc("web.web[0]", "default", 100, 2048), "web", notR2)},
		}},
		{name: "only a full node meets them: the room elsewhere does not count", in: Input{
			Candidates: []Node{roomy("b", "r2"), full("c", "r1")},
			Movers:     []Alloc{with(alloc("web.web[0]", "default", 100, 2048), "web", notR2)},
		}, want: "pool default, on the nodes meeting the constraints of job web: needs 2 GiB memory, 512 MiB free"},
		{name: "no candidate meets them", in: Input{
			Candidates: []Node{roomy("b", "r2"), roomy("c", "r2"), roomy("d", "")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 2048), "web", linux, isR1),
				with(alloc("web.web[1]", "default", 100, 2048), "web", linux, isR1)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (2 allocations): "${meta.rack} = r1" excluded 3 nodes`},
		{name: "each node counted once, by the first constraint it fails", in: Input{
			Candidates: []Node{roomy("b", "r2"), rack(node("c", "default", "dc1", 4000, 8192, 0, 0), "r1"), roomy("d", "r2")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 2048), "web",
				constraint.Constraint{LTarget: "${node.unique.name}", Operand: "!=", RTarget: "c"}, notR2)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (1 allocation): "${meta.rack} != r2" excluded 2 nodes, "${node.unique.name} != c" excluded 1 node`},
		{name: "other pools' nodes are not counted as excluded", in: Input{
			Candidates: []Node{rack(node("g", "gpu", "dc1", 4000, 8192, 0, 0), "r1")},
			Movers:     []Alloc{with(alloc("web.web[0]", "default", 100, 512), "web", notR2)},
		}, want: "pool default: needs 512 MiB memory, 0 MiB free"},
		{name: "movers with other constraints are not in the sum", in: Input{
			Candidates: []Node{roomy("b", "r2"), rack(node("c", "default", "dc1", 4000, 8192, 0, 6144), "r1")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 3072), "web", notR2),
				with(alloc("db.db[0]", "default", 100, 4096), "db")},
		}, want: "pool default, on the nodes meeting the constraints of job web: needs 3 GiB memory, 2 GiB free"},
		{name: "room on the nodes meeting them, but not on one", in: Input{
			Candidates: []Node{roomy("b", "r2"), rack(node("c", "default", "dc1", 4000, 8192, 0, 6144), "r1"),
				rack(node("d", "default", "dc1", 4000, 8192, 0, 6144), "r3")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 3072), "web", notR2)},
		}, want: "pool default, on the nodes meeting the constraints of job web: web.web[0] needs 100 MHz CPU, 3 GiB memory on one node, and no node has that much free"},
		{name: "a constraint no node meets sends the allocation nowhere, even with room for the others", in: Input{
			Candidates: []Node{roomy("b", "r2")},
			Movers: []Alloc{alloc("db.db[0]", "default", 100, 4096),
				with(alloc("web.web[0]", "default", 100, 512), "web", isR1)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (1 allocation): "${meta.rack} = r1" excluded 1 node`},
		{name: "distinct_hosts is not decided per node", in: Input{
			Candidates: []Node{roomy("b", "r2")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 512), "web",
				constraint.Constraint{Operand: "distinct_hosts", RTarget: "true"})},
		}},
		{name: "an unknown operator is met by no node", in: Input{
			Candidates: []Node{roomy("b", "r2")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 512), "web",
				constraint.Constraint{LTarget: "${meta.rack}", Operand: "near", RTarget: "r2"})},
		}, want: `pool default: no eligible node satisfies the constraints of job web (1 allocation): "${meta.rack} near r2" excluded 1 node`},
		{name: "first-fit decreasing keeps the constrained node for the allocation that needs it", in: Input{
			Candidates: []Node{rack(node("c", "default", "dc1", 4000, 4096, 0, 0), "r1"), roomy("b", "r2")},
			Movers: []Alloc{with(alloc("web.web[0]", "default", 100, 3072), "web", isR1),
				alloc("small.s[0]", "default", 100, 1024), alloc("small.s[1]", "default", 100, 1024)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.in); got != tt.want {
				t.Errorf("Check = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

func TestCheckDistinctHosts(t *testing.T) {
	job := func(a Alloc, j, g string, d constraint.Distinct) Alloc {
		a.Namespace, a.Job, a.Group, a.Distinct = "default", j, g, d
		return a
	}
	running := func(n Node, gs ...Group) Node { n.Running = gs; return n }
	web := Group{"default", "web", "web"}
	perJob := constraint.Distinct{Job: true}
	perGroup := constraint.Distinct{Group: true}
	big := func(name string) Node { return node(name, "default", "dc1", 4000, 8192, 0, 0) }
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{name: "a node running the group is excluded, another with room takes it", in: Input{
			Candidates: []Node{running(big("b"), web), big("c")},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup)},
		}},
		{name: "every node runs the group: no room by distinct_hosts", in: Input{
			Candidates: []Node{running(big("b"), web), running(big("c"), web)},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (1 allocation): "distinct_hosts" excluded 2 nodes`},
		{name: "two movers of the group need two nodes", in: Input{
			Candidates: []Node{big("b")},
			Movers: []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup),
				job(alloc("web.web[1]", "default", 100, 512), "web", "web", perGroup)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (2 allocations): "distinct_hosts" excluded 1 node`},
		{name: "two movers of the group on two nodes fit", in: Input{
			Candidates: []Node{big("b"), big("c")},
			Movers: []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup),
				job(alloc("web.web[1]", "default", 100, 512), "web", "web", perGroup)},
		}},
		{name: "group-level: another group of the job does not collide", in: Input{
			Candidates: []Node{running(big("b"), Group{"default", "web", "api"})},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup)},
		}},
		{name: "job-level: another group of the job collides", in: Input{
			Candidates: []Node{running(big("b"), Group{"default", "web", "api"})},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perJob)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (1 allocation): "distinct_hosts" excluded 1 node`},
		{name: "the same job in another namespace does not collide", in: Input{
			Candidates: []Node{running(big("b"), Group{"prod", "web", "web"})},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perJob)},
		}},
		{name: "a mover without distinct_hosts placed first keeps a distinct one off its node", in: Input{
			Candidates: []Node{big("b")},
			Movers: []Alloc{job(alloc("web.web[0]", "default", 100, 1024), "web", "web", constraint.Distinct{}),
				job(alloc("web.web[1]", "default", 100, 512), "web", "web", perGroup)},
		}, want: `pool default: no eligible node satisfies the constraints of job web (2 allocations): "distinct_hosts" excluded 1 node`},
		{name: "without distinct_hosts two go on one node", in: Input{
			Candidates: []Node{running(big("b"), web)},
			Movers: []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", constraint.Distinct{}),
				job(alloc("web.web[1]", "default", 100, 512), "web", "web", constraint.Distinct{})},
		}},
		{name: "distinct nodes full: the nodes meeting it are short of room", in: Input{
			Candidates: []Node{running(big("b"), web), node("c", "default", "dc1", 4000, 8192, 0, 8000)},
			Movers:     []Alloc{job(alloc("web.web[0]", "default", 100, 512), "web", "web", perGroup)},
		}, want: "pool default, on the nodes meeting the constraints of job web: needs 512 MiB memory, 192 MiB free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.in); got != tt.want {
				t.Errorf("Check() = %q, want %q", got, tt.want)
			}
		})
	}
}

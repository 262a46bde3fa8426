package capacity

import "testing"

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

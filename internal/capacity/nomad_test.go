package capacity

import (
	"reflect"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/constraint"
)

// apiAlloc is an allocation of a job of type typ (job.group[0]) running on
// its client, asking 100 MHz and memMB in one task.
func apiAlloc(job, group, typ string, memMB int64) *api.Allocation {
	return &api.Allocation{Name: job + "." + group + "[0]", Namespace: "default", JobID: job, TaskGroup: group,
		DesiredStatus: api.AllocDesiredStatusRun, ClientStatus: api.AllocClientStatusRunning,
		Job: &api.Job{Type: &typ, NodePool: pointerTo("default"), Datacenters: []string{"*"}},
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"t": {Cpu: api.AllocatedCpuResources{CpuShares: 100}, Memory: api.AllocatedMemoryResources{MemoryMB: memMB}}}}}
}

func pointerTo[T any](v T) *T { return &v }

// desired sets what the scheduler wants of a and what its client reports.
func desired(a *api.Allocation, desired, client string) *api.Allocation {
	a.DesiredStatus, a.ClientStatus = desired, client
	return a
}

// withGPUs gives a's task n GPU instances.
func withGPUs(a *api.Allocation, n int) *api.Allocation {
	ids := make([]string, n)
	a.AllocatedResources.Tasks["t"].Devices = []*api.AllocatedDeviceResource{
		{Vendor: "nvidia", Type: "gpu", Name: "T4", DeviceIDs: ids}}
	return a
}

func TestMovers(t *testing.T) {
	constrained := apiAlloc("web", "web", api.JobTypeService, 1024)
	constrained.Job.NodePool, constrained.Job.Datacenters = pointerTo("batch"), []string{"dc1", "eu-*"}
	constrained.Job.TaskGroups = []*api.TaskGroup{{Name: pointerTo("web"),
		Constraints: []*api.Constraint{api.NewConstraint("${meta.rack}", "!=", "r2"), api.NewConstraint("", "distinct_hosts", "true")}}}
	noJob := apiAlloc("orphan", "o", api.JobTypeService, 512)
	noJob.Job = nil
	tests := []struct {
		name   string
		allocs []*api.Allocation
		want   []Alloc
	}{
		{name: "none", allocs: nil, want: nil},
		{name: "a service allocation moves", allocs: []*api.Allocation{apiAlloc("web", "web", api.JobTypeService, 2048)},
			want: []Alloc{{Name: "web.web[0]", Pool: "default", Datacenters: []string{"*"}, Job: "web", Namespace: "default",
				Group: "web", Ask: Resources{CPU: 100, MemoryMB: 2048}}}},
		{name: "batch allocations move", allocs: []*api.Allocation{apiAlloc("etl", "etl", api.JobTypeBatch, 512)},
			want: []Alloc{{Name: "etl.etl[0]", Pool: "default", Datacenters: []string{"*"}, Job: "etl", Namespace: "default",
				Group: "etl", Ask: Resources{CPU: 100, MemoryMB: 512}}}},
		{name: "system and sysbatch allocations do not move", allocs: []*api.Allocation{
			apiAlloc("exporter", "e", api.JobTypeSystem, 512), apiAlloc("gc", "gc", api.JobTypeSysbatch, 512)}},
		{name: "one the scheduler stopped does not move: its replacement exists", allocs: []*api.Allocation{
			desired(apiAlloc("old", "old", api.JobTypeService, 512), api.AllocDesiredStatusStop, api.AllocClientStatusRunning)}},
		{name: "one its client stopped does not move", allocs: []*api.Allocation{
			desired(apiAlloc("a", "a", api.JobTypeService, 512), api.AllocDesiredStatusRun, api.AllocClientStatusComplete),
			desired(apiAlloc("b", "b", api.JobTypeService, 512), api.AllocDesiredStatusRun, api.AllocClientStatusFailed),
			desired(apiAlloc("c", "c", api.JobTypeService, 512), api.AllocDesiredStatusRun, api.AllocClientStatusLost)}},
		{name: "pending on its client, it moves", allocs: []*api.Allocation{
			desired(apiAlloc("p", "p", api.JobTypeService, 512), api.AllocDesiredStatusRun, api.AllocClientStatusPending)},
			want: []Alloc{{Name: "p.p[0]", Pool: "default", Datacenters: []string{"*"}, Job: "p", Namespace: "default",
				Group: "p", Ask: Resources{CPU: 100, MemoryMB: 512}}}},
		{name: "its job's pool, datacenters and constraints, its group's distinct_hosts", allocs: []*api.Allocation{constrained},
			want: []Alloc{{Name: "web.web[0]", Pool: "batch", Datacenters: []string{"dc1", "eu-*"}, Job: "web", Namespace: "default",
				Group: "web", Ask: Resources{CPU: 100, MemoryMB: 1024},
				Constraints: []constraint.Constraint{{LTarget: "${meta.rack}", Operand: "!=", RTarget: "r2"}, {Operand: "distinct_hosts", RTarget: "true"}},
				Distinct:    constraint.Distinct{Group: true}}}},
		{name: "without its job: any pool and datacenter", allocs: []*api.Allocation{noJob},
			want: []Alloc{{Name: "orphan.o[0]", Job: "orphan", Namespace: "default", Group: "o", Ask: Resources{CPU: 100, MemoryMB: 512}}}},
		{name: "its devices are asked", allocs: []*api.Allocation{withGPUs(apiAlloc("ml", "ml", api.JobTypeService, 512), 2)},
			want: []Alloc{{Name: "ml.ml[0]", Pool: "default", Datacenters: []string{"*"}, Job: "ml", Namespace: "default",
				Group: "ml", Ask: Resources{CPU: 100, MemoryMB: 512, Devices: map[string]int{"nvidia/gpu/T4": 2}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Movers(tt.allocs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Movers =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestUsed(t *testing.T) {
	noResources := apiAlloc("n", "n", api.JobTypeService, 0)
	noResources.AllocatedResources = nil
	twoTasks := apiAlloc("two", "two", api.JobTypeService, 1024)
	twoTasks.AllocatedResources.Tasks["u"] = &api.AllocatedTaskResources{Cpu: api.AllocatedCpuResources{CpuShares: 50},
		Memory: api.AllocatedMemoryResources{MemoryMB: 256}}
	twoTasks.AllocatedResources.Tasks["nil"] = nil
	tests := []struct {
		name   string
		allocs []*api.Allocation
		want   Resources
	}{
		{name: "none", want: Resources{}},
		{name: "the sum of every task's CPU and memory", allocs: []*api.Allocation{
			twoTasks, apiAlloc("web", "web", api.JobTypeService, 2048)},
			want: Resources{CPU: 250, MemoryMB: 3328}},
		{name: "system allocations use room too", allocs: []*api.Allocation{apiAlloc("exporter", "e", api.JobTypeSystem, 512)},
			want: Resources{CPU: 100, MemoryMB: 512}},
		{name: "one the scheduler stopped keeps its room until its client stops it", allocs: []*api.Allocation{
			desired(apiAlloc("old", "old", api.JobTypeService, 1024), api.AllocDesiredStatusStop, api.AllocClientStatusRunning)},
			want: Resources{CPU: 100, MemoryMB: 1024}},
		{name: "one its client stopped uses no room", allocs: []*api.Allocation{
			desired(apiAlloc("a", "a", api.JobTypeService, 1024), api.AllocDesiredStatusStop, api.AllocClientStatusComplete),
			desired(apiAlloc("b", "b", api.JobTypeService, 1024), api.AllocDesiredStatusRun, api.AllocClientStatusFailed),
			desired(apiAlloc("c", "c", api.JobTypeService, 1024), api.AllocDesiredStatusRun, api.AllocClientStatusLost),
			apiAlloc("web", "web", api.JobTypeService, 512)},
			want: Resources{CPU: 100, MemoryMB: 512}},
		{name: "no allocated resources: nothing", allocs: []*api.Allocation{noResources}, want: Resources{}},
		{name: "device instances counted by vendor/type/name", allocs: []*api.Allocation{
			withGPUs(apiAlloc("a", "a", api.JobTypeService, 512), 1), withGPUs(apiAlloc("b", "b", api.JobTypeService, 512), 2)},
			want: Resources{CPU: 200, MemoryMB: 1024, Devices: map[string]int{"nvidia/gpu/T4": 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Used(tt.allocs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Used = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRunning(t *testing.T) {
	inNamespace := func(a *api.Allocation, ns string) *api.Allocation { a.Namespace = ns; return a }
	tests := []struct {
		name   string
		allocs []*api.Allocation
		want   []Group
	}{
		{name: "none", want: nil},
		{name: "each group once, in order", allocs: []*api.Allocation{
			apiAlloc("web", "web", api.JobTypeService, 1), apiAlloc("web", "api", api.JobTypeService, 1),
			apiAlloc("web", "web", api.JobTypeService, 1), inNamespace(apiAlloc("web", "web", api.JobTypeService, 1), "prod")},
			want: []Group{{"default", "web", "web"}, {"default", "web", "api"}, {"prod", "web", "web"}}},
		{name: "system allocations count", allocs: []*api.Allocation{apiAlloc("exporter", "e", api.JobTypeSystem, 1)},
			want: []Group{{"default", "exporter", "e"}}},
		{name: "one the scheduler stopped counts until its client stops it", allocs: []*api.Allocation{
			desired(apiAlloc("old", "old", api.JobTypeService, 1), api.AllocDesiredStatusStop, api.AllocClientStatusRunning)},
			want: []Group{{"default", "old", "old"}}},
		{name: "those their client stopped do not", allocs: []*api.Allocation{
			desired(apiAlloc("a", "a", api.JobTypeService, 1), api.AllocDesiredStatusStop, api.AllocClientStatusComplete),
			desired(apiAlloc("b", "b", api.JobTypeService, 1), api.AllocDesiredStatusRun, api.AllocClientStatusFailed),
			desired(apiAlloc("c", "c", api.JobTypeService, 1), api.AllocDesiredStatusRun, api.AllocClientStatusLost)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Running(tt.allocs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Running = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeOf(t *testing.T) {
	base := func() *api.Node {
		return &api.Node{ID: "n1", Name: "host-1", NodePool: "default", Datacenter: "dc1", NodeClass: "big",
			Attributes: map[string]string{"kernel.name": "linux"}, Meta: map[string]string{"rack": "r1"}}
	}
	sized := func(cpu, mem int64) *api.Node {
		n := base()
		n.NodeResources = &api.NodeResources{Cpu: api.NodeCpuResources{CpuShares: cpu}, Memory: api.NodeMemoryResources{MemoryMB: mem}}
		return n
	}
	reserved := sized(4000, 8192)
	reserved.ReservedResources = &api.NodeReservedResources{Cpu: api.NodeReservedCpuResources{CpuShares: 500},
		Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}}
	reservedOnly := base()
	reservedOnly.ReservedResources = &api.NodeReservedResources{Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}}
	gpus := sized(4000, 8192)
	gpus.NodeResources.Devices = []*api.NodeDeviceResource{
		{Vendor: "nvidia", Type: "gpu", Name: "T4", Instances: []*api.NodeDevice{{ID: "g0", Healthy: true}, {ID: "g1"}, {ID: "g2", Healthy: true}}},
		{Vendor: "nvidia", Type: "gpu", Name: "A100", Instances: []*api.NodeDevice{{ID: "g3"}}},
	}
	tests := []struct {
		name string
		node *api.Node
		want Resources
	}{
		{name: "no resources known: none", node: base(), want: Resources{}},
		{name: "its resources", node: sized(4000, 8192), want: Resources{CPU: 4000, MemoryMB: 8192}},
		{name: "less its reserved resources", node: reserved, want: Resources{CPU: 3500, MemoryMB: 7168}},
		{name: "reserved without resources", node: reservedOnly, want: Resources{MemoryMB: -1024}},
		{name: "its healthy device instances", node: gpus,
			want: Resources{CPU: 4000, MemoryMB: 8192, Devices: map[string]int{"nvidia/gpu/T4": 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodeOf(tt.node)
			want := Node{Name: "host-1", Pool: "default", Datacenter: "dc1", Capacity: tt.want,
				Targets: constraint.Node{ID: "n1", Name: "host-1", Datacenter: "dc1", Class: "big", Pool: "default",
					Attributes: map[string]string{"kernel.name": "linux"}, Meta: map[string]string{"rack": "r1"}}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("NodeOf =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestSortNodes(t *testing.T) {
	stub := func(id, pool string, edit ...func(*api.NodeListStub)) *api.NodeListStub {
		n := &api.NodeListStub{ID: id, NodePool: pool, Status: api.NodeStatusReady, SchedulingEligibility: api.NodeSchedulingEligible}
		for _, e := range edit {
			e(n)
		}
		return n
	}
	draining := func(n *api.NodeListStub) { n.Drain, n.SchedulingEligibility = true, api.NodeSchedulingIneligible }
	ineligible := func(n *api.NodeListStub) { n.SchedulingEligibility = api.NodeSchedulingIneligible }
	down := func(n *api.NodeListStub) { n.Status = api.NodeStatusDown }
	tests := []struct {
		name           string
		nodes          []*api.NodeListStub
		leaving        []string
		wantCandidates map[string][]string
		wantOut        []string
	}{
		{name: "no nodes", wantCandidates: map[string][]string{}},
		{name: "candidates by pool and all, by ID",
			nodes:          []*api.NodeListStub{stub("c", "default"), stub("a", "gpu"), stub("b", "default")},
			wantCandidates: map[string][]string{"default": {"b", "c"}, "gpu": {"a"}, "all": {"a", "b", "c"}}},
		{name: "draining or leaving: out, by ID",
			nodes:          []*api.NodeListStub{stub("d", "default", draining), stub("a", "default"), stub("b", "default"), stub("c", "default")},
			leaving:        []string{"b", "x"},
			wantCandidates: map[string][]string{"default": {"a", "c"}, "all": {"a", "c"}}, wantOut: []string{"b", "d"}},
		{name: "leaving though still eligible and ready: out", nodes: []*api.NodeListStub{stub("a", "default")},
			leaving: []string{"a"}, wantCandidates: map[string][]string{}, wantOut: []string{"a"}},
		{name: "ineligible or not ready: neither",
			nodes:          []*api.NodeListStub{stub("a", "default", ineligible), stub("b", "default", down), stub("c", "default")},
			wantCandidates: map[string][]string{"default": {"c"}, "all": {"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := map[string]*api.NodeListStub{}
			for _, n := range tt.nodes {
				nodes[n.ID] = n
			}
			candidates, out := SortNodes(nodes, tt.leaving)
			if !reflect.DeepEqual(candidates, tt.wantCandidates) || !reflect.DeepEqual(out, tt.wantOut) {
				t.Errorf("SortNodes = %v, %v; want %v, %v", candidates, out, tt.wantCandidates, tt.wantOut)
			}
		})
	}
}

func TestEmptiedByDrain(t *testing.T) {
	tests := []struct {
		name string
		node *api.NodeListStub
		want bool
	}{
		{name: "not in the node list", node: nil, want: false},
		{name: "drain done, still ineligible", node: &api.NodeListStub{SchedulingEligibility: api.NodeSchedulingIneligible}, want: true},
		{name: "draining again", node: &api.NodeListStub{Drain: true, SchedulingEligibility: api.NodeSchedulingIneligible}, want: false},
		{name: "made eligible since", node: &api.NodeListStub{SchedulingEligibility: api.NodeSchedulingEligible}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EmptiedByDrain(tt.node); got != tt.want {
				t.Errorf("EmptiedByDrain = %t, want %t", got, tt.want)
			}
		})
	}
}

package policy

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// Nodes shaped like what GET /v1/node/:id returns.
func testNodes() map[string]*api.Node {
	return map[string]*api.Node{
		"web-1": {
			ID: "0b4e9d7a-0000-4000-8000-000000000001", Name: "web-1", Datacenter: "dc1",
			NodePool: "default", NodeClass: "", Status: "ready", SchedulingEligibility: "eligible",
			Meta:       map[string]string{"rack": "r1", "connect.sidecar_image": "envoy"},
			Attributes: map[string]string{"unique.hostname": "web-1", "kernel.name": "linux", "os.name": "ubuntu", "cpu.numcores": "8"},
			Drivers:    map[string]*api.DriverInfo{"docker": {Detected: true, Healthy: true}},
		},
		"gpu-1": {
			ID: "0b4e9d7a-0000-4000-8000-000000000002", Name: "gpu-1", Datacenter: "dc2",
			NodePool: "batch", NodeClass: "gpu-a100", Status: "ready", SchedulingEligibility: "eligible",
			Meta:       map[string]string{"rack": "r2"},
			Attributes: map[string]string{"unique.hostname": "gpu-1", "kernel.name": "linux"},
			Drivers:    map[string]*api.DriverInfo{"exec": {Detected: true, Healthy: true}},
		},
		"batch-1": {
			ID: "0b4e9d7a-0000-4000-8000-000000000003", Name: "batch-1", Datacenter: "dc2",
			NodePool: "batch", NodeClass: "cpu", Status: "down", SchedulingEligibility: "ineligible",
			Attributes: map[string]string{"unique.hostname": "batch-1"},
		},
	}
}

func mustFilterGroup(t *testing.T, name, expr string) Group {
	t.Helper()
	ev, err := CompileFilter(expr)
	if err != nil {
		t.Fatalf("CompileFilter(%q): %v", expr, err)
	}
	return Group{Name: name, Filter: ev, Concurrency: 1}
}

func TestFilterSelectors(t *testing.T) {
	nodes := testNodes()
	tests := []struct {
		name  string
		expr  string
		match []string // node names matched, sorted
	}{
		{name: "node pool", expr: `NodePool == "batch"`, match: []string{"batch-1", "gpu-1"}},
		{name: "meta dotted", expr: `Meta.rack == "r1"`, match: []string{"web-1"}},
		{name: "meta indexed", expr: `Meta["rack"] == "r2"`, match: []string{"gpu-1"}},
		{name: "meta key with dot", expr: `Meta["connect.sidecar_image"] == "envoy"`, match: []string{"web-1"}},
		{name: "attribute", expr: `Attributes["unique.hostname"] == "gpu-1"`, match: []string{"gpu-1"}},
		{name: "substring in class", expr: `"gpu" in NodeClass`, match: []string{"gpu-1"}},
		{name: "class contains", expr: `NodeClass contains "gpu"`, match: []string{"gpu-1"}},
		{name: "class matches", expr: `NodeClass matches "^gpu-"`, match: []string{"gpu-1"}},
		{name: "key in map", expr: `"rack" in Meta`, match: []string{"gpu-1", "web-1"}},
		{name: "datacenter and status", expr: `Datacenter == "dc2" and Status == "ready"`, match: []string{"gpu-1"}},
		{name: "not", expr: `not (NodePool == "batch")`, match: []string{"web-1"}},
		{name: "eligibility", expr: `SchedulingEligibility != "eligible"`, match: []string{"batch-1"}},
		{name: "name", expr: `Name == "web-1" or Name == "batch-1"`, match: []string{"batch-1", "web-1"}},
		{name: "empty meta", expr: `Meta is empty`, match: []string{"batch-1"}},
		{name: "driver healthy", expr: `"docker" in Drivers`, match: []string{"web-1"}},
		{name: "collection", expr: `any Meta as k, v { v == "r2" }`, match: []string{"gpu-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustFilterGroup(t, "g", tt.expr)
			var got []string
			for _, name := range []string{"batch-1", "gpu-1", "web-1"} {
				ok, err := g.Filter.Evaluate(nodes[name])
				if err != nil {
					t.Fatalf("Evaluate(%s): %v", name, err)
				}
				if ok {
					got = append(got, name)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.match, ",") {
				t.Errorf("%s matched %v, want %v", tt.expr, got, tt.match)
			}
		})
	}
}

func TestCompileFilterErrors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string // substring of the error; "" = valid
	}{
		{name: "valid deep field", expr: `Drivers.docker.Healthy == true`},
		{name: "valid pointer field", expr: `NodeResources.Cpu.CpuShares == 1000`},
		{name: "valid slice index", expr: `Events.0.Message == "x"`},
		{name: "valid collection local", expr: `all Attributes as k, v { v != "" }`},
		{name: "syntax", expr: `NodePool == `, want: "invalid filter expression"},
		{name: "empty", expr: ``, want: "invalid filter expression"},
		{name: "unknown field", expr: `NodePol == "batch"`, want: `the node has no field "NodePol"`},
		{name: "lower case field", expr: `nodepool == "batch"`, want: `no field "nodepool"`},
		{name: "unknown nested field", expr: `Drivers.docker.Healty == true`, want: `no field "Healty"`},
		{name: "field of a string", expr: `Meta.rack.x == "y"`, want: "is a string"},
		{name: "unknown field inside or", expr: `NodePool == "a" or Statuss == "ready"`, want: `no field "Statuss"`},
		{name: "unknown collection field", expr: `all Metas as k { k != "" }`, want: `no field "Metas"`},
		{name: "slice needs an index", expr: `Events.first.Message == "x"`, want: "is a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileFilter(tt.expr)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CompileFilter(%q): %v", tt.expr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CompileFilter(%q) error = %v, want it to contain %q", tt.expr, err, tt.want)
			}
		})
	}
}

func TestFilterOnIdentity(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		{`NodePool == "batch"`, true},
		{`Datacenter == "dc1" and not (NodeClass == "gpu")`, true},
		{`Name matches "^web-" or ID == "abc"`, true},
		{`"/NodePool" == "batch"`, true},
		{`NodePool == "batch" and Meta.tier == "db"`, false},
		{`Status == "ready"`, false},
		{`SchedulingEligibility == "eligible"`, false},
		{`Attributes["kernel.name"] == "linux"`, false},
		{`all Meta as k, v { v != "" }`, false},
		{`NodePool ==`, false}, // cannot be parsed
	}
	for _, tt := range tests {
		if got := FilterOnIdentity(tt.expr); got != tt.want {
			t.Errorf("FilterOnIdentity(%q) = %t, want %t", tt.expr, got, tt.want)
		}
	}
}

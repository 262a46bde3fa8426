package constraint

import (
	"slices"
	"testing"

	"github.com/hashicorp/nomad/api"
)

var testNode = Node{
	ID: "9f2c-node-id", Name: "client-1", Datacenter: "dc1", Class: "web", Pool: "batch",
	Attributes: map[string]string{
		"kernel.name": "linux", "cpu.arch": "amd64", "cpu.numcores": "4", "os.version": "24.04",
		"nomad.version": "1.10.3", "driver.docker.version": "27.3.1-beta.2", "unique.storage.bytesfree": "9500000000",
		"cpu.frequency": "2.5",
	},
	Meta: map[string]string{"rack": "r1", "zones": "a, b,c", "empty": ""},
}

func TestMet(t *testing.T) {
	tests := []struct {
		name string
		c    Constraint
		want bool
	}{
		// Equality and its aliases.
		{"= attribute", Constraint{"${attr.kernel.name}", "=", "linux"}, true},
		{"= differs", Constraint{"${attr.kernel.name}", "=", "windows"}, false},
		{"== meta", Constraint{"${meta.rack}", "==", "r1"}, true},
		{"is", Constraint{"${node.class}", "is", "web"}, true},
		{"= literal on the right, target on the right", Constraint{"dc1", "=", "${node.datacenter}"}, true},
		{"= missing attribute fails", Constraint{"${attr.nope}", "=", "linux"}, false},
		{"= missing on both sides fails", Constraint{"${attr.nope}", "=", "${meta.nope}"}, false},
		{"= set to empty equals empty literal? no: needs a value, compares", Constraint{"${meta.empty}", "=", ""}, true},
		// Inequality: a missing target is the empty value.
		{"!= differs", Constraint{"${meta.rack}", "!=", "r2"}, true},
		{"!= same", Constraint{"${meta.rack}", "!=", "r1"}, false},
		{"not", Constraint{"${node.pool}", "not", "default"}, true},
		{"!= missing target is empty, so differs", Constraint{"${meta.nope}", "!=", "r2"}, true},
		{"!= both missing are equal", Constraint{"${meta.nope}", "!=", "${attr.nope}"}, false},
		// Node interpolations.
		{"node.unique.id", Constraint{"${node.unique.id}", "=", "9f2c-node-id"}, true},
		{"node.unique.name", Constraint{"${node.unique.name}", "=", "client-1"}, true},
		{"node.datacenter", Constraint{"${node.datacenter}", "=", "dc1"}, true},
		{"node.pool", Constraint{"${node.pool}", "=", "batch"}, true},
		{"node.region does not resolve", Constraint{"${node.region}", "=", "global"}, false},
		{"unknown interpolation does not resolve", Constraint{"${env.HOME}", "is_set", ""}, false},
		// Order: integers, floats, then lexical.
		{"< integers", Constraint{"${attr.cpu.numcores}", "<", "16"}, true},
		{"> integers numerically, not lexically", Constraint{"${attr.cpu.numcores}", ">", "16"}, false},
		{">= integers equal", Constraint{"${attr.cpu.numcores}", ">=", "4"}, true},
		{"<= large integers", Constraint{"${attr.unique.storage.bytesfree}", "<=", "10000000000"}, true},
		{"> floats", Constraint{"${attr.cpu.frequency}", ">", "2.25"}, true},
		{"< float against integer", Constraint{"${attr.cpu.frequency}", "<", "3"}, true},
		{"< lexical", Constraint{"${meta.rack}", "<", "r2"}, true},
		{">= lexical", Constraint{"${meta.rack}", ">=", "r09"}, true},
		{"< lexical prefix", Constraint{"${meta.rack}", "<", "r10"}, true},
		{"> lexical false", Constraint{"${node.class}", ">", "zz"}, false},
		{"< missing fails", Constraint{"${meta.nope}", "<", "z"}, false},
		// is_set / is_not_set.
		{"is_set", Constraint{"${meta.rack}", "is_set", ""}, true},
		{"is_set empty value is set", Constraint{"${meta.empty}", "is_set", ""}, true},
		{"is_set missing", Constraint{"${meta.nope}", "is_set", ""}, false},
		{"is_not_set missing", Constraint{"${meta.nope}", "is_not_set", ""}, true},
		{"is_not_set present", Constraint{"${attr.kernel.name}", "is_not_set", ""}, false},
		{"is_not_set unresolvable interpolation", Constraint{"${node.region}", "is_not_set", ""}, true},
		// version (go-version constraints, lenient versions).
		{"version >=", Constraint{"${attr.nomad.version}", "version", ">= 1.9.0"}, true},
		{"version range", Constraint{"${attr.nomad.version}", "version", ">= 1.10, < 1.11"}, true},
		{"version pessimistic", Constraint{"${attr.nomad.version}", "version", "~> 1.9.0"}, false},
		{"version lenient left", Constraint{"${attr.os.version}", "version", "> 22.04"}, true},
		{"version pre-release left fails plain range", Constraint{"${attr.driver.docker.version}", "version", ">= 27.0"}, false},
		{"version bad constraint", Constraint{"${attr.nomad.version}", "version", ">>> 1"}, false},
		{"version bad version", Constraint{"${meta.rack}", "version", ">= 1.0"}, false},
		{"version missing", Constraint{"${attr.nope}", "version", ">= 1.0"}, false},
		// semver (strict constraints, Semantic Versioning precedence).
		{"semver >=", Constraint{"${attr.nomad.version}", "semver", ">= 1.10.0"}, true},
		{"semver pre-release compares by precedence", Constraint{"${attr.driver.docker.version}", "semver", ">= 27.0.0"}, true},
		{"semver pre-release below its release", Constraint{"${attr.driver.docker.version}", "semver", "< 27.3.1"}, true},
		{"semver no operator is =", Constraint{"${attr.nomad.version}", "semver", "1.10.3"}, true},
		{"semver !=", Constraint{"${attr.nomad.version}", "semver", "!= 1.10.3"}, false},
		{"semver and", Constraint{"${attr.nomad.version}", "semver", ">1.9.0,<1.10.3"}, false},
		{"semver short version", Constraint{"${attr.nomad.version}", "semver", ">= 1.10"}, true},
		{"semver pre-release needs a hyphen", Constraint{"${attr.nomad.version}", "semver", ">= 1.10.0beta1"}, false},
		{"version pre-release without a hyphen", Constraint{"${attr.nomad.version}", "version", ">= 1.10.0beta1"}, true},
		{"semver has no ~>", Constraint{"${attr.nomad.version}", "semver", "~> 1.10.0"}, false},
		// regexp.
		{"regexp", Constraint{"${attr.cpu.arch}", "regexp", "^(amd|arm)64$"}, true},
		{"regexp unanchored", Constraint{"${node.unique.name}", "regexp", "ent-"}, true},
		{"regexp no match", Constraint{"${attr.cpu.arch}", "regexp", "^arm"}, false},
		{"regexp invalid", Constraint{"${attr.cpu.arch}", "regexp", "("}, false},
		{"regexp missing", Constraint{"${meta.nope}", "regexp", ".*"}, false},
		// set_contains, set_contains_all, set_contains_any (spaces trimmed).
		{"set_contains", Constraint{"${meta.zones}", "set_contains", "a,c"}, true},
		{"set_contains_all", Constraint{"${meta.zones}", "set_contains_all", "b, c"}, true},
		{"set_contains_all lacks one", Constraint{"${meta.zones}", "set_contains_all", "a,d"}, false},
		{"set_contains_any", Constraint{"${meta.zones}", "set_contains_any", "d, b"}, true},
		{"set_contains_any none", Constraint{"${meta.zones}", "set_contains_any", "d,e"}, false},
		{"set_contains missing", Constraint{"${meta.nope}", "set_contains", "a"}, false},
		// Not decided per node, and unknown operators.
		{"distinct_hosts passes", Constraint{"", "distinct_hosts", "true"}, true},
		{"distinct_property passes", Constraint{"${meta.rack}", "distinct_property", "1"}, true},
		{"unknown operator fails", Constraint{"${meta.rack}", "near", "r1"}, false},
		{"empty operator fails", Constraint{"${meta.rack}", "", "r1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the parsed cache
				if got := Met(tt.c, testNode); got != tt.want {
					t.Errorf("Met(%s) = %v, want %v", tt.c, got, tt.want)
				}
			}
		})
	}
}

func TestFirst(t *testing.T) {
	cs := []Constraint{{"${attr.kernel.name}", "=", "linux"}, {"${meta.rack}", "!=", "r1"}, {"${node.pool}", "=", "x"}}
	if c, ok := First(cs, testNode); ok || c != cs[1] {
		t.Errorf("First = %v, %v; want the second constraint, false", c, ok)
	}
	if _, ok := First(cs[:1], testNode); !ok {
		t.Error("First of constraints the node meets: not ok")
	}
	if _, ok := First(nil, testNode); !ok {
		t.Error("no constraints: not ok")
	}
}

func TestOfGroup(t *testing.T) {
	str := func(s string) *string { return &s }
	job := &api.Job{
		Constraints: []*api.Constraint{api.NewConstraint("${attr.kernel.name}", "=", "linux")},
		TaskGroups: []*api.TaskGroup{
			{Name: str("web"), Constraints: []*api.Constraint{api.NewConstraint("${meta.rack}", "!=", "r2")},
				Tasks: []*api.Task{
					{Name: "a", Constraints: []*api.Constraint{api.NewConstraint("${attr.cpu.arch}", "=", "amd64")}},
					{Name: "b"},
				}},
			{Name: str("db"), Constraints: []*api.Constraint{api.NewConstraint("${meta.ssd}", "is_set", "")}},
		},
	}
	want := []Constraint{{"${attr.kernel.name}", "=", "linux"}, {"${meta.rack}", "!=", "r2"}, {"${attr.cpu.arch}", "=", "amd64"}}
	if got := OfGroup(job, "web"); !slices.Equal(got, want) {
		t.Errorf("OfGroup(web) = %v, want %v", got, want)
	}
	if got := OfGroup(job, "other"); !slices.Equal(got, want[:1]) {
		t.Errorf("OfGroup(other) = %v, want the job's only", got)
	}
	if got := OfGroup(nil, "web"); got != nil {
		t.Errorf("OfGroup(nil) = %v", got)
	}
}

func TestNodeOf(t *testing.T) {
	n := &api.Node{ID: "id", Name: "n", Datacenter: "dc", NodeClass: "c", NodePool: "p",
		Attributes: map[string]string{"a": "1"}, Meta: map[string]string{"m": "2"}}
	got := NodeOf(n)
	for _, c := range []Constraint{{"${node.unique.id}", "=", "id"}, {"${node.unique.name}", "=", "n"},
		{"${node.datacenter}", "=", "dc"}, {"${node.class}", "=", "c"}, {"${node.pool}", "=", "p"},
		{"${attr.a}", "=", "1"}, {"${meta.m}", "=", "2"}} {
		if !Met(c, got) {
			t.Errorf("NodeOf: %s not met", c)
		}
	}
}

// Checking a pool's nodes parses each regular expression once.
func BenchmarkMetRegexp(b *testing.B) {
	c := Constraint{"${attr.cpu.arch}", "regexp", "^(amd|arm)64$"}
	for b.Loop() {
		Met(c, testNode)
	}
}

func TestDistinctOf(t *testing.T) {
	dh := func(v string) *api.Constraint {
		return &api.Constraint{Operand: api.ConstraintDistinctHosts, RTarget: v}
	}
	job := func(jobCs, groupCs, taskCs []*api.Constraint) *api.Job {
		j := api.NewServiceJob("web", "web", "global", 50)
		j.Constraints = jobCs
		j.TaskGroups = []*api.TaskGroup{{Name: new("web"), Constraints: groupCs, Tasks: []*api.Task{{Name: "t", Constraints: taskCs}}}}
		return j
	}
	tests := []struct {
		name string
		job  *api.Job
		want Distinct
	}{
		{"none", job(nil, nil, nil), Distinct{}},
		{"job, no value", job([]*api.Constraint{dh("")}, nil, nil), Distinct{Job: true}},
		{"group, true", job(nil, []*api.Constraint{dh("true")}, nil), Distinct{Group: true}},
		{"group, false", job(nil, []*api.Constraint{dh("false")}, nil), Distinct{}},
		{"not a boolean enforces it", job([]*api.Constraint{dh("yes please")}, nil, nil), Distinct{Job: true}},
		{"a task's is ignored, as Nomad does", job(nil, nil, []*api.Constraint{dh("")}), Distinct{}},
		{"nil job", nil, Distinct{}},
	}
	for _, tt := range tests {
		if got := DistinctOf(tt.job, "web"); got != tt.want {
			t.Errorf("%s: DistinctOf() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if DistinctOf(job(nil, []*api.Constraint{dh("")}, nil), "other") != (Distinct{}) {
		t.Error("another group's distinct_hosts applied")
	}
	d := Distinct{Group: true}
	for _, c := range []struct {
		ns, job, group string
		want           bool
	}{{"default", "web", "web", true}, {"default", "web", "api", false}, {"prod", "web", "web", false}, {"default", "db", "web", false}} {
		if got := d.Collides("default", "web", "web", c.ns, c.job, c.group); got != c.want {
			t.Errorf("group-level Collides(%s/%s/%s) = %v, want %v", c.ns, c.job, c.group, got, c.want)
		}
	}
	if !(Distinct{Job: true}).Collides("default", "web", "web", "default", "web", "api") {
		t.Error("job-level distinct_hosts must collide with another group of the job")
	}
}

package constrainttest_test

import (
	"testing"

	"github.com/hashicorp/nomad/api"
	"pgregory.net/rapid"

	"github.com/rollboot/rollboot/internal/constraint"
	"github.com/rollboot/rollboot/internal/nomadsim/simfeasible"
)

// The two implementations are written apart: internal/constraint (the capacity
// gate's) and internal/nomadsim/simfeasible (the emulator's). Only these tests
// import both. Where they disagree one of them is wrong: the case goes into the
// table (constrainttest.Cases) with Nomad's answer, read from
// scheduler/feasible.go, and the wrong one is fixed.

// values are built to reach each branch: integers, floats and what strconv
// reads as floats, versions lenient and strict, pre-releases, constraint
// lists, sets, regular expressions, blanks ASCII and not.
var values = []string{
	"", " ", "0", "1", "4", "16", "-3", "+5", "1e3", "1_000", "0x10", "2.5", "10.25", "NaN", "Inf", "-inf",
	"9007199254740993", "9007199254740992", "99999999999999999999",
	"1.10.3", "1.10", "1.10.3.0", "v2.1.0", "1.7.0-beta", "1.7.0-rc.1", "1.3.0-beta1+ent", "1.10.0beta1", "27.3.1-beta.2",
	">= 1.0", ">= 1.0, < 2", " >= 1.2 ,  < 2 ", "~> 1.10", "= 1.10.3", "!=1.10.3", ">= 1.0.0,", "> = 1.0.0",
	">= 1.0.0\u00a0", "\v>= 1.0.0", "\t< 2.0.0\r\n", ">= 1.7.0-dev", ">>> 1",
	"linux", "Linux", "r1", "r10", "r2", "a, b,c", "  x , y  ", "a,", ",", "b, c", "a b",
	"^r[0-9]$", "(", "(?i)^LINUX$", "^$", "md$", `(a)\1`,
}
var keys = []string{"k1", "k2", "k3"}

// targets are the interpolations, well-formed or not.
var targets = func() []string {
	out := []string{
		"${node.unique.id}", "${node.unique.name}", "${node.datacenter}", "${node.class}", "${node.pool}",
		"${node.region}", "${node.class", "${attr.}", "${env.HOME}", "$attr.k1", "${ attr.k1}",
		"${attr.k1", "${meta.k1}}",
	}
	for _, k := range keys {
		out = append(out, "${attr."+k+"}", "${meta."+k+"}")
	}
	return out
}()
var operators = []string{
	"=", "==", "is", "!=", "not", "<", "<=", ">", ">=", "version", "semver", "regexp",
	"set_contains", "set_contains_all", "set_contains_any", "is_set", "is_not_set",
	"distinct_hosts", "distinct_property", "", "IS", "near",
}

// Every operator with every pair of values and targets, on a node whose
// attributes and meta hold some of the values and on a bare one: both decide
// alike.
func TestImplementationsAgreeOnEveryPair(t *testing.T) {
	full := &api.Node{ID: "id-1", Name: "1.10.3", Datacenter: "dc1", NodeClass: "r1", NodePool: "4",
		Attributes: map[string]string{"k1": "NaN", "k2": "1.7.0-rc.1", "k3": "a, b,c"},
		Meta:       map[string]string{"k1": "", "k2": ">= 1.0, < 2", "k3": "^r[0-9]$"}}
	bare := &api.Node{ID: "id-2", NodePool: "default"}
	sides := append(append([]string(nil), values...), targets...)
	disagree := 0
	for _, n := range []*api.Node{full, bare} {
		gateNode := constraint.NodeOf(n)
		for _, op := range operators {
			for _, l := range sides {
				for _, r := range sides {
					gate := constraint.Met(constraint.Constraint{LTarget: l, Operand: op, RTarget: r}, gateNode)
					sim := simfeasible.Meets(api.NewConstraint(l, op, r), n)
					if gate != sim {
						if disagree++; disagree <= 20 {
							t.Errorf("%q %s %q on %s: internal/constraint %v, emulator %v", l, op, r, n.ID, gate, sim)
						}
					}
				}
			}
		}
	}
	if disagree > 20 {
		t.Errorf("and %d more disagreements", disagree-20)
	}
}

// Random constraints on random nodes, sides drawn from the values, the targets
// and short strings over the characters the grammars care about: both decide
// alike.
func TestImplementationsAgree(t *testing.T) {
	fuzz := rapid.StringOfN(rapid.SampledFrom([]rune("0123456789.,-+ ~<>=!vbeta\t\v\u00a0^$()[]|*NaIf{}")), 0, 12, -1)
	side := rapid.OneOf(rapid.SampledFrom(values), rapid.SampledFrom(targets), fuzz)
	kv := rapid.MapOfN(rapid.SampledFrom(keys), rapid.OneOf(rapid.SampledFrom(values), fuzz), 0, len(keys))

	rapid.Check(t, func(t *rapid.T) {
		n := &api.Node{
			ID:         rapid.SampledFrom([]string{"", "id-1", "1.10.3"}).Draw(t, "id"),
			Name:       rapid.SampledFrom(values).Draw(t, "name"),
			Datacenter: rapid.SampledFrom([]string{"", "dc1", "r1"}).Draw(t, "dc"),
			NodeClass:  rapid.SampledFrom(values).Draw(t, "class"),
			NodePool:   rapid.SampledFrom([]string{"default", "batch", "4"}).Draw(t, "pool"),
		}
		if rapid.Bool().Draw(t, "has attributes") {
			n.Attributes = kv.Draw(t, "attributes")
		}
		if rapid.Bool().Draw(t, "has meta") {
			n.Meta = kv.Draw(t, "meta")
		}
		l, op, r := side.Draw(t, "left"), rapid.SampledFrom(operators).Draw(t, "operator"), side.Draw(t, "right")

		gate := constraint.Met(constraint.Constraint{LTarget: l, Operand: op, RTarget: r}, constraint.NodeOf(n))
		sim := simfeasible.Meets(api.NewConstraint(l, op, r), n)
		if gate != sim {
			t.Fatalf("%q %s %q on node id %q name %q dc %q class %q pool %q attributes %q meta %q: internal/constraint %v, emulator %v",
				l, op, r, n.ID, n.Name, n.Datacenter, n.NodeClass, n.NodePool, n.Attributes, n.Meta, gate, sim)
		}
	})
}

// The two read a block's distinct_hosts alike, whatever its value.
func TestDistinctHostsAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var block []*api.Constraint
		for _, v := range rapid.SliceOfN(rapid.SampledFrom([]string{"", "true", "false", "1", "0", "t", "F", "yes", " false", "TRUE"}), 0, 3).Draw(t, "values") {
			if rapid.Bool().Draw(t, "other first") {
				block = append(block, api.NewConstraint("${meta.rack}", "=", "r1"))
			}
			block = append(block, &api.Constraint{Operand: api.ConstraintDistinctHosts, RTarget: v})
		}
		job := api.NewServiceJob("web", "web", "global", 50)
		job.TaskGroups = []*api.TaskGroup{{Name: new("web"), Constraints: block}}
		gate := constraint.DistinctOf(job, "web").Group
		if sim := simfeasible.DistinctHosts(block); gate != sim {
			t.Fatalf("block %+v: internal/constraint %v, emulator %v", block, gate, sim)
		}
	})
}

package simfeasible_test

import (
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/constrainttest"
	"github.com/rollboot/rollboot/internal/nomadsim/simfeasible"
)

func apiNode(n constrainttest.Node) *api.Node {
	return &api.Node{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.Class, NodePool: n.Pool,
		Attributes: n.Attributes, Meta: n.Meta}
}

// The emulator decides every case of Nomad's behaviour as Nomad does, whether
// its value is parsed when the Set is built (a literal) or at the check (an
// interpolation).
func TestCases(t *testing.T) {
	for _, tc := range constrainttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := api.NewConstraint(tc.LTarget, tc.Operand, tc.RTarget)
			n := apiNode(tc.On())
			if got := simfeasible.Meets(c, n); got != tc.Want {
				t.Errorf("%s %s %q on %s: %v, want %v (Nomad: %s)", tc.LTarget, tc.Operand, tc.RTarget, n.Name, got, tc.Want, tc.Nomad)
			}
			// The same Set checked twice (its parsed value reused).
			s := simfeasible.Compile([]*api.Constraint{c})
			for range 2 {
				if _, got := s.Feasible(n); got != tc.Want {
					t.Errorf("Set.Feasible: %v, want %v", got, tc.Want)
				}
			}
		})
	}
}

// Feasible stops at the first constraint the node fails, in the order of the
// lists (the job's, then the group's).
func TestFeasibleFirst(t *testing.T) {
	n := apiNode(constrainttest.Client)
	job := []*api.Constraint{api.NewConstraint("${attr.kernel.name}", "=", "linux"), nil}
	group := []*api.Constraint{api.NewConstraint("${meta.rack}", "!=", "r1"), api.NewConstraint("${node.pool}", "=", "x")}
	s := simfeasible.Compile(job, group)
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3 (nil skipped)", s.Len())
	}
	if c, ok := s.Feasible(n); ok || c != group[0] {
		t.Errorf("Feasible = %v, %v; want the group's first, false", c, ok)
	}
	if c, ok := simfeasible.Compile(job).Feasible(n); !ok || c != nil {
		t.Errorf("Feasible(job) = %v, %v; want nil, true", c, ok)
	}
	if _, ok := simfeasible.Compile().Feasible(n); !ok {
		t.Error("no constraints: not feasible")
	}
}

func TestDistinctHosts(t *testing.T) {
	for _, tc := range constrainttest.DistinctHostsCases {
		var block []*api.Constraint
		for range tc.Others {
			block = append(block, api.NewConstraint("${meta.rack}", "=", "r1"))
		}
		for _, v := range tc.Values {
			block = append(block, &api.Constraint{Operand: api.ConstraintDistinctHosts, RTarget: v})
		}
		if got := simfeasible.DistinctHosts(block); got != tc.Want {
			t.Errorf("%s: DistinctHosts(%q) = %v, want %v (Nomad: %s)", tc.Name, tc.Values, got, tc.Want, tc.Nomad)
		}
	}
}

// Validate accepts and refuses what Nomad accepts and refuses at submit (its
// messages are checked with AddJob in nomadsim's constraints_test.go).
func TestValidate(t *testing.T) {
	for _, tc := range constrainttest.ValidateCases {
		err := simfeasible.Validate(api.NewConstraint(tc.LTarget, tc.Operand, tc.RTarget))
		if (err == nil) != tc.Valid {
			t.Errorf("Validate(%q %q %q) = %v, want valid %v (Nomad: %s)", tc.LTarget, tc.Operand, tc.RTarget, err, tc.Valid, tc.Nomad)
		}
	}
}

// Checking a pool's nodes parses a literal regular expression once.
func BenchmarkFeasibleRegexp(b *testing.B) {
	s := simfeasible.Compile([]*api.Constraint{api.NewConstraint("${attr.cpu.arch}", "regexp", "^(amd|arm)64$")})
	n := apiNode(constrainttest.Client)
	for b.Loop() {
		s.Feasible(n)
	}
}

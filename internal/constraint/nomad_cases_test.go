package constraint

import (
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/constrainttest"
)

// caseNode is the case's node as the capacity gate gets it: an API node taken
// through NodeOf.
func caseNode(n constrainttest.Node) Node {
	return NodeOf(&api.Node{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.Class, NodePool: n.Pool,
		Attributes: n.Attributes, Meta: n.Meta})
}

// The capacity gate decides every case of Nomad's behaviour as Nomad's
// scheduler does (the table the emulator's own checker is held to as well).
func TestNomadCases(t *testing.T) {
	for _, tc := range constrainttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := Constraint{LTarget: tc.LTarget, Operand: tc.Operand, RTarget: tc.RTarget}
			n := caseNode(tc.On())
			for range 2 { // the second time from the parsed cache
				if got := Met(c, n); got != tc.Want {
					t.Errorf("Met(%q %q %q) on %s = %v, want %v (Nomad: %s)", tc.LTarget, tc.Operand, tc.RTarget, n.Name, got, tc.Want, tc.Nomad)
				}
			}
		})
	}
}

// DistinctOf reads a job's and a group's distinct_hosts as Nomad does.
func TestNomadDistinctHostsCases(t *testing.T) {
	for _, tc := range constrainttest.DistinctHostsCases {
		var block []*api.Constraint
		for range tc.Others {
			block = append(block, api.NewConstraint("${meta.rack}", "=", "r1"))
		}
		for _, v := range tc.Values {
			block = append(block, &api.Constraint{Operand: api.ConstraintDistinctHosts, RTarget: v})
		}
		job := api.NewServiceJob("web", "web", "global", 50)
		job.TaskGroups = []*api.TaskGroup{{Name: new("web")}}
		job.Constraints = block
		if got := DistinctOf(job, "web"); got != (Distinct{Job: tc.Want}) {
			t.Errorf("%s: job block %q: DistinctOf = %+v, want Job %v (Nomad: %s)", tc.Name, tc.Values, got, tc.Want, tc.Nomad)
		}
		job.Constraints, job.TaskGroups[0].Constraints = nil, block
		if got := DistinctOf(job, "web"); got != (Distinct{Group: tc.Want}) {
			t.Errorf("%s: group block %q: DistinctOf = %+v, want Group %v (Nomad: %s)", tc.Name, tc.Values, got, tc.Want, tc.Nomad)
		}
	}
}

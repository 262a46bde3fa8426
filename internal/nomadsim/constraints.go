package nomadsim

import (
	"fmt"
	"maps"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/constraint"
)

// Placement constraints: a job's and its groups' constraint blocks are checked
// against each node before an allocation is placed on it, as the scheduler's
// stack does (scheduler/feasible/stack.go: the job's ConstraintChecker, then
// the task group's with TaskGroupConstraints; scheduler/feasible/feasible.go
// ConstraintChecker.Feasible, resolveTarget and checkConstraint, which package
// constraint follows). distinct_hosts is enforced as DistinctHostsIterator
// does: an allocation of a job (or group) with it does not go on a node with a
// live allocation of the same job (or group). distinct_property is accepted but
// not enforced (DistinctPropertyIterator is not modelled). A job with an invalid constraint is refused, as Job.Register
// refuses it (nomad/structs Constraint.Validate).

// ConstraintSpec is a constraint block (api.Constraint): attribute, operator
// and value.
type ConstraintSpec struct {
	Attribute string `json:"attribute,omitempty"`
	// Operator defaults to "=" (jobspec2/hcl_conversions.go decodeConstraint).
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
}

// apiConstraints checks the specs and returns them as the API's constraints.
func apiConstraints(specs []ConstraintSpec) ([]*api.Constraint, error) {
	var out []*api.Constraint
	for i, c := range specs {
		if c.Operator == "" {
			c.Operator = "="
		}
		if err := constraint.Validate(constraint.Constraint{LTarget: c.Attribute, Operand: c.Operator, RTarget: c.Value}); err != nil {
			return nil, fmt.Errorf("constraint %d: %w", i, err)
		}
		out = append(out, api.NewConstraint(c.Attribute, c.Operator, c.Value))
	}
	return out, nil
}

// groupConstraints are the constraints each group's allocations must meet: the
// job's and the group's (the emulated task has none of its own).
func groupConstraints(job *api.Job) map[string][]constraint.Constraint {
	out := map[string][]constraint.Constraint{}
	for _, tg := range job.TaskGroups {
		out[*tg.Name] = constraint.OfGroup(job, *tg.Name)
	}
	return out
}

// groupDistinct returns each group's distinct_hosts constraints (the job's and
// the group's blocks: constraint.DistinctOf).
func groupDistinct(job *api.Job) map[string]constraint.Distinct {
	out := map[string]constraint.Distinct{}
	for _, tg := range job.TaskGroups {
		if d := constraint.DistinctOf(job, *tg.Name); d.Any() {
			out[*tg.Name] = d
		}
	}
	return out
}

// groupKey names a task group of a job.
type groupKey struct{ ns, job, group string }

// distinctOn returns the nodes group's next allocation may not go on by its
// distinct_hosts constraints d: those with an allocation of the job (or of the
// group) that its client has not stopped, as the scheduler's ProposedAllocs
// counts them (scheduler/feasible/context.go; DistinctHostsIterator
// satisfiesDistinctHosts). byGroup holds every group's allocations.
func (j *simJob) distinctOn(group string, d constraint.Distinct, byGroup map[groupKey][]*simAlloc) map[string]bool {
	on := map[string]bool{}
	for _, g := range j.spec.Groups {
		if !d.Job && g.Name != group {
			continue
		}
		for _, sa := range byGroup[groupKey{j.spec.Namespace, j.spec.ID, g.Name}] {
			if !allocClientTerminal(sa.a) {
				on[sa.a.NodeID] = true
			}
		}
	}
	return on
}

// feasible reports whether group's allocations may be placed on n by its
// constraints.
func (j *simJob) feasible(group string, n *api.Node) bool {
	cs := j.constraints[group]
	if len(cs) == 0 {
		return true
	}
	_, ok := constraint.First(cs, constraint.NodeOf(n))
	return ok
}

// SetNodeAttributes sets attributes of host's node, as its client's
// fingerprints would (an empty value deletes a key). Like any change to the
// node, it bumps its ModifyIndex.
func (s *Sim) SetNodeAttributes(host string, attrs map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return err
	}
	a := maps.Clone(sn.node.Attributes)
	for k, v := range attrs {
		if v == "" {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	sn.node.Attributes = a
	s.cluster.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
	return nil
}

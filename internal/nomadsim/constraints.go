package nomadsim

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/simfeasible"
)

// Placement constraints: a job's and its groups' constraint blocks are checked
// against each node before an allocation is placed on it, as the scheduler's
// stack does (scheduler/stack.go, scheduler/feasible/stack.go since 1.11: the
// job's ConstraintChecker, then the task group's with taskGroupConstraints),
// by the emulator's own checker, package simfeasible (ConstraintChecker,
// resolveTarget, checkConstraint). The emulator does not use rollboot's
// internal/constraint, which the capacity gate decides with: a mistake there
// shows as the gate and the emulator disagreeing. distinct_hosts is enforced
// as DistinctHostsIterator does: an allocation of a job (or group) with it
// does not go on a node with a live allocation of the same job (or group).
// distinct_property is accepted but not enforced (DistinctPropertyIterator is
// not modelled). A job with an invalid constraint is refused, as Job.Register
// refuses it (nomad/structs Constraint.Validate: simfeasible.Validate).

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
		ac := api.NewConstraint(c.Attribute, c.Operator, c.Value)
		if err := simfeasible.Validate(ac); err != nil {
			return nil, fmt.Errorf("constraint %d: %w", i, err)
		}
		out = append(out, ac)
	}
	return out, nil
}

// groupConstraints are the constraints each group's allocations must meet: the
// job's, then the group's and its tasks' (taskGroupConstraints; the emulated
// task has none of its own).
func groupConstraints(job *api.Job) map[string]simfeasible.Set {
	out := map[string]simfeasible.Set{}
	for _, tg := range job.TaskGroups {
		lists := [][]*api.Constraint{job.Constraints, tg.Constraints}
		for _, t := range tg.Tasks {
			if t != nil {
				lists = append(lists, t.Constraints)
			}
		}
		out[*tg.Name] = simfeasible.Compile(lists...)
	}
	return out
}

// distinctHosts says which distinct_hosts constraints apply to a group's
// allocations: the job's block (none of the job's allocations share a node)
// and the group's (none of the group's). Nomad reads no task's
// (DistinctHostsIterator SetJob, SetTaskGroup).
type distinctHosts struct{ job, group bool }

func (d distinctHosts) any() bool { return d.job || d.group }

// groupDistinct returns the distinct_hosts constraints of each group that has
// any.
func groupDistinct(job *api.Job) map[string]distinctHosts {
	out := map[string]distinctHosts{}
	onJob := simfeasible.DistinctHosts(job.Constraints)
	for _, tg := range job.TaskGroups {
		if d := (distinctHosts{job: onJob, group: simfeasible.DistinctHosts(tg.Constraints)}); d.any() {
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
func (j *simJob) distinctOn(group string, d distinctHosts, byGroup map[groupKey][]*simAlloc) map[string]bool {
	on := map[string]bool{}
	for _, g := range j.spec.Groups {
		if !d.job && g.Name != group {
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
	if j.spec.Driver != "" && !hasDriver(n, j.spec.Driver) {
		return false
	}
	cs, ok := j.constraints[group]
	if !ok || cs.Len() == 0 {
		return true
	}
	_, ok = cs.Feasible(n)
	return ok
}

// hasDriver is the scheduler's DriverChecker (scheduler/feasible/feasible.go
// hasDrivers), checked before the constraints: a node that reports the driver
// runs it if it is detected and healthy; one that does not report it, if its
// attribute driver.<name> parses as true.
func hasDriver(n *api.Node, driver string) bool {
	if d, ok := n.Drivers[driver]; ok {
		return d != nil && d.Detected && d.Healthy
	}
	v, err := strconv.ParseBool(n.Attributes["driver."+driver])
	return err == nil && v
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

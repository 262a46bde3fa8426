package nomadsim

import (
	"errors"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/simfeasible"
)

// Placement affinities: a job's, its groups' and its tasks' affinity blocks
// score each feasible node, as the scheduler's NodeAffinityIterator does
// (scheduler/feasible/rank.go: SetTaskGroup merges the job's, the group's and
// the tasks' affinities; Next scores a node the sum of the weights of the
// affinities it matches over the sum of their absolute weights, in [-1, 1];
// matchesAffinity resolves both targets as a constraint's and checkAffinity
// is checkConstraint, so the emulator matches them with package simfeasible).
// Nomad averages that score with the others (ScoreNormalizationIterator:
// binpack in [0, 1], job anti-affinity, reschedule penalty) and places on the
// best; the emulator has no binpack score and places on the least loaded
// node, so it ranks by the affinity score first and by load among equals. A
// weight of ±100 (a score of ±1) outranks any binpack difference in Nomad too;
// a small weight may not, so the emulator favours affinities more than Nomad
// does when their weights are small. Nomad refuses an affinity with a weight
// of 0 or beyond ±100, without an attribute, or with a bad operator
// (nomad/structs Affinity.Validate): so does the emulator.

// AffinitySpec is an affinity block (api.Affinity): attribute, operator,
// value and weight.
type AffinitySpec struct {
	Attribute string `json:"attribute,omitempty"`
	// Operator defaults to "=" (jobspec2 decodeAffinity, as for constraints).
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Weight   int    `json:"weight,omitempty"`
}

// apiAffinities checks the specs and returns them as the API's affinities.
func apiAffinities(specs []AffinitySpec) ([]*api.Affinity, error) {
	var out []*api.Affinity
	for i, a := range specs {
		if a.Operator == "" {
			a.Operator = "="
		}
		if err := validateAffinity(a); err != nil {
			return nil, fmt.Errorf("affinity %d: %w", i, err)
		}
		out = append(out, api.NewAffinity(a.Attribute, a.Operator, a.Value, int8(a.Weight)))
	}
	return out, nil
}

// validateAffinity is Affinity.Validate: the operators of a constraint but
// distinct_hosts and distinct_property, a weight in [-100, 100] but 0.
func validateAffinity(a AffinitySpec) error {
	var errs []error
	switch a.Operator {
	case api.ConstraintDistinctHosts, api.ConstraintDistinctProperty:
		errs = append(errs, fmt.Errorf("unknown affinity operator %q", a.Operator))
	default:
		if err := simfeasible.Validate(api.NewConstraint(a.Attribute, a.Operator, a.Value)); err != nil {
			errs = append(errs, err)
		}
	}
	if a.Attribute == "" {
		errs = append(errs, errors.New("no attribute provided but is required"))
	}
	if a.Weight == 0 {
		errs = append(errs, errors.New("affinity weight cannot be zero"))
	}
	if a.Weight > 100 || a.Weight < -100 {
		errs = append(errs, errors.New("affinity weight must be within the range [-100,100]"))
	}
	return errors.Join(errs...)
}

// affinitySpecs is the emulator's model of the API's affinities.
func affinitySpecs(as []*api.Affinity) []AffinitySpec {
	var out []AffinitySpec
	for _, a := range as {
		if a != nil {
			// An affinity without a weight weighs 50 (api.Affinity.Canonicalize).
			out = append(out, AffinitySpec{Attribute: a.LTarget, Operator: a.Operand, Value: a.RTarget, Weight: int(derefOr(a.Weight, 50))})
		}
	}
	return out
}

// groupAffinities are the affinities each group's allocations are placed by:
// the job's, then the group's and its tasks' (SetTaskGroup). A group without
// any is left out.
func groupAffinities(job *api.Job) map[string][]*api.Affinity {
	out := map[string][]*api.Affinity{}
	for _, tg := range job.TaskGroups {
		all := append(append([]*api.Affinity(nil), job.Affinities...), tg.Affinities...)
		for _, t := range tg.Tasks {
			if t != nil {
				all = append(all, t.Affinities...)
			}
		}
		if len(all) > 0 {
			out[*tg.Name] = all
		}
	}
	return out
}

// affinityScore is NodeAffinityIterator's score of n for affs: the weights of
// those n matches over the sum of all weights' absolute values (0 without
// affinities).
func affinityScore(affs []*api.Affinity, n *api.Node) float64 {
	var sum, score float64
	for _, a := range affs {
		w := float64(deref(a.Weight))
		if w < 0 {
			sum -= w
		} else {
			sum += w
		}
		if simfeasible.Meets(api.NewConstraint(a.LTarget, a.Operand, a.RTarget), n) {
			score += w
		}
	}
	if sum == 0 {
		return 0
	}
	return score / sum
}

// Package simfeasible is the emulator's own check of placement constraints:
// whether a node meets a job's constraint blocks, whether a constraint would be
// accepted at submit, and whether a block asks for distinct hosts.
//
// It is written from Nomad's behaviour, independently of rollboot's
// internal/constraint (which the capacity gate uses): the emulator places
// allocations with this package, so a mistake in internal/constraint shows as a
// disagreement between the gate and the emulator instead of being shared by
// both. Both are checked against the same table of Nomad's behaviour
// (internal/constrainttest). Nothing here may import internal/constraint.
//
// Behaviour followed (the same from Nomad 1.9.7 to 2.0; the file was
// scheduler/feasible.go up to 1.10 and is scheduler/feasible/feasible.go
// since 1.11):
//   - ConstraintChecker.Feasible and meetsConstraint: every constraint must
//     hold; both targets are resolved on the node first.
//   - resolveTarget: which targets interpolate and which are literals.
//   - checkConstraint: what each operator yields, a target the node lacks
//     included.
//   - checkOrder (checkIntegralOrder, checkFloatOrder, checkLexicalOrder,
//     compareOrder), checkVersionMatch with newVersionConstraintParser and
//     newSemverConstraintParser, checkRegexpMatch, checkSetContainsAll,
//     checkSetContainsAny.
//   - helper/constraints/semver NewConstraint: the grammar of the semver
//     operator's value.
//   - DistinctHostsIterator.hasDistinctHostsConstraint.
//   - nomad/structs/structs.go Constraint.Validate (as in 1.10.5 and 1.11.0–1.11.1:
//     the attribute's syntax is not checked; see Validate).
//
// Version parsing and go-version's constraints come from
// github.com/hashicorp/go-version, the library Nomad itself calls for them.
package simfeasible

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
)

// Operators Nomad's scheduler knows (nomad/structs/structs.go, the Constraint*
// constants, and the comparison operators of checkConstraint).
const (
	opEq1, opEq2, opEq3 = "=", "==", "is"
	opNe1, opNe2        = "!=", "not"
	opLt, opLe          = "<", "<="
	opGt, opGe          = ">", ">="
)

// Set is a list of constraints ready to be checked against nodes: the values of
// regexp, version and semver constraints that are literals are parsed once, as
// Nomad parses each once per evaluation (its context's RegexpCache,
// VersionConstraintCache and SemverConstraintCache). A value that interpolates
// the node is parsed at each check. A Set is not changed once built, so it may
// be checked from several goroutines.
type Set struct {
	checks []check
}

type check struct {
	c *api.Constraint
	// For regexp, version and semver with a literal value: what it parses
	// to, or parsed with nothing in it when it does not parse (never met).
	parsed *matcher
}

// matcher is a parsed right-hand side: a regular expression or a version
// constraint (go-version's or semver's). nil fields: the value did not parse.
type matcher struct {
	re  *regexp.Regexp
	ver versionCheck
}

type versionCheck interface{ Check(*version.Version) bool }

// Compile builds the Set of the constraints of lists, in order (the scheduler
// checks the job's constraints, then the group's and its tasks':
// scheduler/stack.go, GenericStack.SetJob and SetTaskGroup). nil entries are
// skipped.
func Compile(lists ...[]*api.Constraint) Set {
	var s Set
	for _, l := range lists {
		for _, c := range l {
			if c == nil {
				continue
			}
			ch := check{c: c}
			if isLiteral(c.RTarget) {
				switch c.Operand {
				case api.ConstraintRegex, api.ConstraintVersion, api.ConstraintSemver:
					ch.parsed = parseRight(c.Operand, c.RTarget)
				}
			}
			s.checks = append(s.checks, ch)
		}
	}
	return s
}

// Len is the number of constraints in s.
func (s Set) Len() int { return len(s.checks) }

// Feasible reports whether n meets every constraint of s, and if not the first
// it fails (ConstraintChecker.Feasible stops there and counts it in the
// placement metrics).
func (s Set) Feasible(n *api.Node) (failed *api.Constraint, ok bool) {
	for _, ch := range s.checks {
		if !ch.meets(n) {
			return ch.c, false
		}
	}
	return nil, true
}

// Meets reports whether n meets c.
func Meets(c *api.Constraint, n *api.Node) bool {
	_, ok := Compile([]*api.Constraint{c}).Feasible(n)
	return ok
}

// meets follows ConstraintChecker.meetsConstraint and checkConstraint: both
// targets are resolved (a target the node lacks resolves to the empty string,
// not found), then the operator decides.
func (ch check) meets(n *api.Node) bool {
	c := ch.c
	left, haveLeft := resolveTarget(c.LTarget, n)
	right, haveRight := resolveTarget(c.RTarget, n)
	both := haveLeft && haveRight

	switch c.Operand {
	case api.ConstraintDistinctHosts, api.ConstraintDistinctProperty:
		// checkConstraint lets them through: DistinctHostsIterator and
		// DistinctPropertyIterator decide them from the allocations.
		return true
	case opEq1, opEq2, opEq3:
		// Both must be found: two missing targets are not equal.
		return both && left == right
	case opNe1, opNe2:
		// !reflect.DeepEqual of the two values: missing is the empty
		// string, so a missing target differs from any non-empty value and
		// equals another missing one (or an empty one).
		return left != right
	case opLt, opLe, opGt, opGe:
		return both && ordered(c.Operand, left, right)
	case api.ConstraintAttributeIsSet:
		return haveLeft
	case api.ConstraintAttributeIsNotSet:
		return !haveLeft
	case api.ConstraintRegex:
		if !both {
			return false
		}
		m := ch.rightSide(right)
		return m.re != nil && m.re.MatchString(left)
	case api.ConstraintVersion, api.ConstraintSemver:
		if !both {
			return false
		}
		// checkVersionMatch: the node's value is parsed leniently
		// (version.NewVersion) for both operators; only the constraint's
		// grammar differs.
		v, err := version.NewVersion(left)
		if err != nil {
			return false
		}
		m := ch.rightSide(right)
		return m.ver != nil && m.ver.Check(v)
	case api.ConstraintSetContains, api.ConstraintSetContainsAll:
		return both && setHas(left, right, true)
	case api.ConstraintSetContainsAny:
		return both && setHas(left, right, false)
	}
	// An operator checkConstraint does not know (the empty one included,
	// and it is case-sensitive): never met.
	return false
}

// rightSide returns the parsed value of a regexp, version or semver
// constraint: parsed at Compile when it is a literal, else now (value is the
// resolved target).
func (ch check) rightSide(value string) *matcher {
	if ch.parsed != nil {
		return ch.parsed
	}
	return parseRight(ch.c.Operand, value)
}

func parseRight(op, value string) *matcher {
	m := &matcher{}
	switch op {
	case api.ConstraintRegex:
		// checkRegexpMatch: Go's regexp (RE2), unanchored; one that does not
		// compile matches nothing.
		if re, err := regexp.Compile(value); err == nil {
			m.re = re
		}
	case api.ConstraintVersion:
		// newVersionConstraintParser: go-version's constraints (~> and
		// its pre-release rules included).
		if cs, err := version.NewConstraint(value); err == nil {
			m.ver = cs
		}
	case api.ConstraintSemver:
		if cs, err := parseSemver(value); err == nil {
			m.ver = cs
		}
	}
	return m
}

// isLiteral follows resolveTarget: a target that does not start with "${" is
// its own value.
func isLiteral(target string) bool { return !strings.HasPrefix(target, "${") }

// resolveTarget is the value of a target on n and whether it was found
// (scheduler/feasible.go resolveTarget). The five node fields are matched
// exactly and always found, even empty; ${attr.<key>} and ${meta.<key>} are
// looked up by what follows the prefix, with one closing brace taken off if
// there is one (so "${attr.kernel.name" finds kernel.name as well), and found
// only if the node has the key. Any other interpolation (${node.region},
// ${env.X}, a misspelt one) is not found.
func resolveTarget(target string, n *api.Node) (string, bool) {
	if isLiteral(target) {
		return target, true
	}
	switch target {
	case "${node.unique.id}":
		return n.ID, true
	case "${node.datacenter}":
		return n.Datacenter, true
	case "${node.unique.name}":
		return n.Name, true
	case "${node.class}":
		return n.NodeClass, true
	case "${node.pool}":
		return n.NodePool, true
	}
	for _, src := range []struct {
		prefix string
		values map[string]string
	}{{"${attr.", n.Attributes}, {"${meta.", n.Meta}} {
		if rest, ok := strings.CutPrefix(target, src.prefix); ok {
			v, found := src.values[strings.TrimSuffix(rest, "}")]
			return v, found
		}
	}
	return "", false
}

// ordered decides <, <=, > and >= as checkOrder does: as 64-bit integers when
// both sides parse as base-10 integers, else as float64 when both parse as
// floats (strconv.ParseFloat: "1e3", "Inf", "NaN" and "1_000" included), else
// byte-wise as strings. Float comparisons follow Go's operators, so NaN is
// ordered against nothing, itself included.
func ordered(op, left, right string) bool {
	if l, err := strconv.ParseInt(left, 10, 64); err == nil {
		if r, err := strconv.ParseInt(right, 10, 64); err == nil {
			return holds(op, l < r, l == r)
		}
	}
	if l, err := strconv.ParseFloat(left, 64); err == nil {
		if r, err := strconv.ParseFloat(right, 64); err == nil {
			if math.IsNaN(l) || math.IsNaN(r) {
				return false
			}
			return holds(op, l < r, l == r)
		}
	}
	return holds(op, left < right, left == right)
}

// holds is op's answer given whether left < right and left == right.
func holds(op string, less, equal bool) bool {
	switch op {
	case opLt:
		return less
	case opLe:
		return less || equal
	case opGt:
		return !less && !equal
	case opGe:
		return !less
	}
	return false
}

// setHas follows checkSetContainsAll (all) and checkSetContainsAny: both sides
// are split on commas and each item trimmed of white space
// (strings.TrimSpace); all: every item of set must be in have; any: at least
// one.
func setHas(have, set string, all bool) bool {
	items := map[string]bool{}
	for _, it := range strings.Split(have, ",") {
		items[strings.TrimSpace(it)] = true
	}
	found := 0
	want := strings.Split(set, ",")
	for _, it := range want {
		if items[strings.TrimSpace(it)] {
			found++
		}
	}
	if all {
		return found == len(want)
	}
	return found > 0
}

// semverList is the semver operator's constraint
// (helper/constraints/semver.NewConstraint): comma-separated items, each met
// for the version to be.
type semverList []semverItem

type semverItem struct {
	op string // "", "=", "!=", ">", "<", ">=", "<="
	v  *version.Version
}

// semverItemRE is one item of the semver grammar: blanks (what RE2's \s
// matches: space, \t, \n, \f, \r, and no other), an optional operator, blanks,
// a strict Semantic Version (go-version's SemverRegexpRaw: a pre-release must
// follow a hyphen, and "v1", "1.2" are accepted), blanks. No ~>.
var semverItemRE = regexp.MustCompile(`^[ \t\n\f\r]*(<=|>=|!=|<|>|=)?[ \t\n\f\r]*(` + version.SemverRegexpRaw + `)[ \t\n\f\r]*$`)

func parseSemver(s string) (semverList, error) {
	var out semverList
	for _, item := range strings.Split(s, ",") {
		m := semverItemRE.FindStringSubmatch(item)
		if m == nil {
			return nil, fmt.Errorf("malformed constraint: %s", item)
		}
		v, err := version.NewSemver(m[2])
		if err != nil {
			return nil, err
		}
		out = append(out, semverItem{op: m[1], v: v})
	}
	return out, nil
}

// Check reports whether v meets every item, by Semantic Versioning's precedence
// (go-version's Compare: build metadata ignored, a pre-release below its
// release), with no special rule for pre-releases, unlike go-version's
// constraints.
func (l semverList) Check(v *version.Version) bool {
	for _, it := range l {
		d := v.Compare(it.v)
		ok := false
		switch it.op {
		case "", "=":
			ok = d == 0
		case "!=":
			ok = d != 0
		case ">":
			ok = d > 0
		case "<":
			ok = d < 0
		case ">=":
			ok = d >= 0
		case "<=":
			ok = d <= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// DistinctHosts reports whether a constraint block (a job's or a task group's;
// Nomad never reads a task's) asks for distinct hosts, as
// DistinctHostsIterator.hasDistinctHostsConstraint decides: the first
// distinct_hosts constraint decides; an empty value means true, and a value
// strconv.ParseBool cannot read still enforces it (its behaviour before the
// value was read).
func DistinctHosts(block []*api.Constraint) bool {
	for _, c := range block {
		if c == nil || c.Operand != api.ConstraintDistinctHosts {
			continue
		}
		if c.RTarget == "" {
			return true
		}
		on, err := strconv.ParseBool(c.RTarget)
		if err != nil {
			return true
		}
		return on
	}
	return false
}

// Validate says why Nomad would refuse c when a job is submitted
// (nomad/structs/structs.go Constraint.Validate, 1.10.5). The check of the
// attribute's syntax that 1.11.2 added (validateConstraintAttribute, rejecting
// for instance ${node.region}) is not made, so that the emulator accepts the
// jobs a 1.10 cluster holds.
func Validate(c *api.Constraint) error {
	var errs []error
	if c.Operand == "" {
		errs = append(errs, errors.New("missing constraint operand"))
	}
	needsAttribute := true
	switch op := c.Operand; op {
	case api.ConstraintDistinctHosts:
		needsAttribute = false
	case api.ConstraintSetContains, api.ConstraintSetContainsAll, api.ConstraintSetContainsAny:
		if c.RTarget == "" {
			errs = append(errs, fmt.Errorf("operator %q requires a value", op))
		}
	case api.ConstraintRegex:
		if _, err := regexp.Compile(c.RTarget); err != nil {
			errs = append(errs, fmt.Errorf("regular expression failed to compile: %w", err))
		}
	case api.ConstraintVersion:
		if _, err := version.NewConstraint(c.RTarget); err != nil {
			errs = append(errs, fmt.Errorf("version constraint is invalid: %w", err))
		}
	case api.ConstraintSemver:
		if _, err := parseSemver(c.RTarget); err != nil {
			errs = append(errs, fmt.Errorf("semver constraint is invalid: %w", err))
		}
	case api.ConstraintDistinctProperty:
		if c.RTarget != "" {
			n, err := strconv.ParseUint(c.RTarget, 10, 64)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Errorf("distinct_property: value %q is not a count of 1 or more", c.RTarget))
			}
		}
	case api.ConstraintAttributeIsSet, api.ConstraintAttributeIsNotSet:
		if c.RTarget != "" {
			errs = append(errs, fmt.Errorf("operator %q does not support a value", op))
		}
	case opEq1, opEq2, opEq3, opNe1, opNe2, opLt, opLe, opGt, opGe:
		if c.RTarget == "" {
			errs = append(errs, fmt.Errorf("operator %q requires a value", op))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown constraint operator %q", op))
	}
	if needsAttribute && c.LTarget == "" {
		errs = append(errs, errors.New("no attribute provided but is required by operator"))
	}
	return errors.Join(errs...)
}

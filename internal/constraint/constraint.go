// Package constraint decides whether a node meets a job's placement
// constraints, as Nomad's scheduler does (pure). The capacity gate uses it to
// place the allocations a drain moves only on nodes their jobs accept.
//
// It follows nomad/scheduler/feasible/feasible.go: ConstraintChecker.Feasible
// (every constraint must hold), resolveTarget (what a target interpolates),
// checkConstraint and the operators' helpers (checkOrder, checkVersionMatch,
// checkRegexpMatch, checkSetContainsAll, checkSetContainsAny), and
// scheduler/feasible/stack.go TaskGroupConstraints (a group's constraints are
// its own and its tasks').
//
// The emulator does not use this package: it checks constraints with its own
// internal/nomadsim/simfeasible, so that a mistake here shows as the gate and
// the emulator disagreeing. Both are held to the table of Nomad's behaviour in
// internal/constrainttest.
package constraint

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
)

// Constraint is one constraint block: LTarget (attribute), Operand (operator)
// and RTarget (value), as in api.Constraint.
type Constraint struct {
	LTarget, Operand, RTarget string
}

// String is the constraint as Nomad shows it (structs.Constraint.String):
// "${meta.rack} != r2".
func (c Constraint) String() string {
	return fmt.Sprintf("%s %s %s", c.LTarget, c.Operand, c.RTarget)
}

// Node is what a constraint's targets interpolate on a node.
type Node struct {
	ID         string // ${node.unique.id}
	Name       string // ${node.unique.name}
	Datacenter string // ${node.datacenter}
	Class      string // ${node.class}
	Pool       string // ${node.pool}
	Attributes map[string]string
	Meta       map[string]string
}

// NodeOf takes what constraints interpolate from an API node.
func NodeOf(n *api.Node) Node {
	return Node{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, Class: n.NodeClass, Pool: n.NodePool,
		Attributes: n.Attributes, Meta: n.Meta}
}

// OfGroup returns the constraints an allocation of the job's task group must
// meet: the job's, the group's and each of its tasks' (the scheduler's stack
// checks the job's constraints and then TaskGroupConstraints).
func OfGroup(job *api.Job, group string) []Constraint {
	if job == nil {
		return nil
	}
	out := fromAPI(nil, job.Constraints)
	for _, tg := range job.TaskGroups {
		if tg == nil || tg.Name == nil || *tg.Name != group {
			continue
		}
		out = fromAPI(out, tg.Constraints)
		for _, t := range tg.Tasks {
			if t != nil {
				out = fromAPI(out, t.Constraints)
			}
		}
	}
	return out
}

// Distinct says which distinct_hosts constraints an allocation of the job's
// task group carries: the job's (no two of the job's allocations on a node) and
// the group's (no two of the group's). Nomad reads them from the job's and the
// group's constraint blocks only, never the tasks'
// (scheduler/feasible/feasible.go DistinctHostsIterator SetJob, SetTaskGroup).
type Distinct struct{ Job, Group bool }

// DistinctOf returns the distinct_hosts constraints of the job's task group.
func DistinctOf(job *api.Job, group string) Distinct {
	var d Distinct
	if job == nil {
		return d
	}
	d.Job = distinctHosts(job.Constraints)
	for _, tg := range job.TaskGroups {
		if tg != nil && tg.Name != nil && *tg.Name == group {
			d.Group = distinctHosts(tg.Constraints)
		}
	}
	return d
}

// Any reports whether any distinct_hosts constraint applies.
func (d Distinct) Any() bool { return d.Job || d.Group }

// Collides reports whether an allocation of (namespace, job, group) with these
// distinct_hosts constraints may not go on a node that has (or will have) an
// allocation of (ns, jobID, tg): any of the job's when the job asks for
// distinct hosts, the same group's when either does
// (DistinctHostsIterator.satisfiesDistinctHosts).
func (d Distinct) Collides(namespace, job, group, ns, jobID, tg string) bool {
	if !d.Any() || ns != namespace || jobID != job {
		return false
	}
	return d.Job || tg == group
}

// distinctHosts reports whether cs ask for distinct hosts: a distinct_hosts
// constraint whose value is empty, true, or not a boolean at all (Nomad keeps
// its old behaviour then: DistinctHostsIterator.hasDistinctHostsConstraint).
func distinctHosts(cs []*api.Constraint) bool {
	for _, c := range cs {
		if c != nil && c.Operand == api.ConstraintDistinctHosts {
			if c.RTarget == "" {
				return true
			}
			on, err := strconv.ParseBool(c.RTarget)
			return err != nil || on
		}
	}
	return false
}

func fromAPI(out []Constraint, cs []*api.Constraint) []Constraint {
	for _, c := range cs {
		if c != nil {
			out = append(out, Constraint{LTarget: c.LTarget, Operand: c.Operand, RTarget: c.RTarget})
		}
	}
	return out
}

// PerNode reports whether the constraint is decided node by node.
// distinct_hosts and distinct_property depend on where the job's other
// allocations are: Nomad's ConstraintChecker passes them, and the scheduler's
// DistinctHostsIterator and DistinctPropertyIterator decide them.
func (c Constraint) PerNode() bool {
	return c.Operand != api.ConstraintDistinctHosts && c.Operand != api.ConstraintDistinctProperty
}

// First returns the first of cs that n does not meet (ok when it meets them
// all), as ConstraintChecker.Feasible stops at the first that fails.
func First(cs []Constraint, n Node) (failed Constraint, ok bool) {
	for _, c := range cs {
		if !Met(c, n) {
			return c, false
		}
	}
	return Constraint{}, true
}

// Met reports whether n meets c (ConstraintChecker.meetsConstraint). A target
// that does not resolve on the node is an empty value: it fails every operator
// that needs it (=, <, regexp, version, set_contains, ...) and is_set, meets
// is_not_set, and meets != unless the other side is empty too. An unknown
// operator is never met (Nomad rejects such a job at submit). distinct_hosts
// and distinct_property are met (not decided per node).
func Met(c Constraint, n Node) bool {
	l, lok := resolve(c.LTarget, n)
	r, rok := resolve(c.RTarget, n)
	switch c.Operand {
	case api.ConstraintDistinctHosts, api.ConstraintDistinctProperty:
		return true
	case "=", "==", "is":
		return lok && rok && l == r
	case "!=", "not":
		return l != r
	case "<", "<=", ">", ">=":
		return lok && rok && order(c.Operand, l, r)
	case api.ConstraintAttributeIsSet:
		return lok
	case api.ConstraintAttributeIsNotSet:
		return !lok
	case api.ConstraintVersion:
		return lok && rok && versionMatch(l, r, parseVersion)
	case api.ConstraintSemver:
		return lok && rok && versionMatch(l, r, parseSemverCached)
	case api.ConstraintRegex:
		return lok && rok && regexpMatch(l, r)
	case api.ConstraintSetContains, api.ConstraintSetContainsAll:
		return lok && rok && setContains(l, r, true)
	case api.ConstraintSetContainsAny:
		return lok && rok && setContains(l, r, false)
	}
	return false
}

// resolve is a target's value on n (resolveTarget): a literal unless it starts
// with "${"; ${node.unique.id}, ${node.unique.name}, ${node.datacenter},
// ${node.class}, ${node.pool}, ${attr.<key>} and ${meta.<key>}. Anything else
// (${node.region} included) does not resolve.
func resolve(target string, n Node) (string, bool) {
	if !strings.HasPrefix(target, "${") {
		return target, true
	}
	switch target {
	case "${node.unique.id}":
		return n.ID, true
	case "${node.unique.name}":
		return n.Name, true
	case "${node.datacenter}":
		return n.Datacenter, true
	case "${node.class}":
		return n.Class, true
	case "${node.pool}":
		return n.Pool, true
	}
	if key, ok := strings.CutPrefix(target, "${attr."); ok {
		v, ok := n.Attributes[strings.TrimSuffix(key, "}")]
		return v, ok
	}
	if key, ok := strings.CutPrefix(target, "${meta."); ok {
		v, ok := n.Meta[strings.TrimSuffix(key, "}")]
		return v, ok
	}
	return "", false
}

// order compares l and r as integers when both are, else as floats when both
// are, else lexically (checkOrder, since Nomad 1.5), with Go's operators as
// compareOrder does: NaN (strconv reads "NaN") is ordered against nothing, not
// even itself, where cmp.Compare would put it below every number.
func order(op, l, r string) bool {
	if li, err := strconv.ParseInt(l, 10, 64); err == nil {
		if ri, err := strconv.ParseInt(r, 10, 64); err == nil {
			return compare(op, li, ri)
		}
	}
	if lf, err := strconv.ParseFloat(l, 64); err == nil {
		if rf, err := strconv.ParseFloat(r, 64); err == nil {
			return compare(op, lf, rf)
		}
	}
	return compare(op, l, r)
}

func compare[T cmp.Ordered](op string, l, r T) bool {
	switch op {
	case "<":
		return l < r
	case "<=":
		return l <= r
	case ">":
		return l > r
	case ">=":
		return l >= r
	}
	return false
}

// versionMatch parses l as a version (go-version's lenient parser) and checks
// it against the constraints in r (checkVersionMatch).
func versionMatch[C interface{ Check(*version.Version) bool }](l, r string, parse func(string) (C, error)) bool {
	v, err := version.NewVersion(l)
	if err != nil {
		return false
	}
	c, err := parse(r)
	if err != nil {
		return false
	}
	return c.Check(v)
}

// semverConstraints are the constraints of the semver operator: comma
// separated, each an optional =, !=, >, <, >= or <= and a version whose
// pre-release follows a hyphen (go-version's NewSemver), compared with Semantic
// Versioning's precedence (Nomad's helper/constraints/semver; unlike
// go-version's constraints, no ~> and no special treatment of pre-releases).
// Blanks around the operator and the version are those of RE2's \s, which
// Nomad's pattern allows there: space, \t, \n, \f and \r, not \v nor any
// Unicode space (strings.TrimSpace would take those too, and accept a
// constraint Nomad finds malformed and never meets).
type semverConstraints []semverConstraint

type semverConstraint struct {
	op string
	v  *version.Version
}

var semverOps = []string{">=", "<=", "!=", "=", ">", "<"} // longest first

const semverBlanks = " \t\n\f\r"

func parseSemver(s string) (semverConstraints, error) {
	var out semverConstraints
	for part := range strings.SplitSeq(s, ",") {
		part = strings.Trim(part, semverBlanks)
		op := ""
		for _, o := range semverOps {
			if rest, ok := strings.CutPrefix(part, o); ok {
				op, part = o, strings.TrimLeft(rest, semverBlanks)
				break
			}
		}
		v, err := version.NewSemver(part)
		if err != nil {
			return nil, fmt.Errorf("malformed semver constraint %q: %w", s, err)
		}
		out = append(out, semverConstraint{op: op, v: v})
	}
	return out, nil
}

// Check reports whether v meets every constraint.
func (cs semverConstraints) Check(v *version.Version) bool {
	for _, c := range cs {
		d := v.Compare(c.v)
		var ok bool
		switch c.op {
		case "", "=":
			ok = d == 0
		case "!=":
			ok = d != 0
		default:
			ok = compare(c.op, d, 0)
		}
		if !ok {
			return false
		}
	}
	return true
}

// regexpMatch reports whether l matches the regular expression r (an invalid
// one matches nothing).
func regexpMatch(l, r string) bool {
	re, err := cached('r', r, regexp.Compile)
	return err == nil && re.MatchString(l)
}

func parseVersion(s string) (version.Constraints, error) {
	return cached('v', s, version.NewConstraint)
}

func parseSemverCached(s string) (semverConstraints, error) { return cached('s', s, parseSemver) }

// parsed keeps the regular expressions and version constraints parsed: the
// same few are checked against every node of a pool (Nomad keeps them for an
// evaluation in its context's RegexpCache, VersionConstraintCache and
// SemverConstraintCache). Emptied when it reaches maxParsed.
var parsed struct {
	mu sync.Mutex
	m  map[parseKey]parseResult
}

const maxParsed = 1024

type parseKey struct {
	kind byte
	s    string
}

type parseResult struct {
	v   any
	err error
}

func cached[T any](kind byte, s string, parse func(string) (T, error)) (T, error) {
	k := parseKey{kind, s}
	parsed.mu.Lock()
	got, ok := parsed.m[k]
	parsed.mu.Unlock()
	if !ok {
		v, err := parse(s)
		got = parseResult{v, err}
		parsed.mu.Lock()
		if parsed.m == nil || len(parsed.m) >= maxParsed {
			parsed.m = map[parseKey]parseResult{}
		}
		parsed.m[k] = got
		parsed.mu.Unlock()
	}
	if got.err != nil {
		var zero T
		return zero, got.err
	}
	return got.v.(T), nil
}

// setContains reports whether the comma separated set l holds all (or any) of
// the comma separated values r, spaces trimmed.
func setContains(l, r string, all bool) bool {
	have := map[string]bool{}
	for v := range strings.SplitSeq(l, ",") {
		have[strings.TrimSpace(v)] = true
	}
	for v := range strings.SplitSeq(r, ",") {
		switch in := have[strings.TrimSpace(v)]; {
		case in && !all:
			return true
		case !in && all:
			return false
		}
	}
	return all
}

// Package constrainttest is the table of Nomad's placement-constraint
// behaviour that rollboot's two implementations are checked against:
// internal/constraint (the capacity gate's, which decides in production) and
// internal/nomadsim/simfeasible (the emulator's, which places allocations in
// every test). Each case says what Nomad's scheduler decides for one
// constraint on one node, and which upstream function decides it.
//
// It is plain data and imports neither implementation, so that neither
// imports the other; only tests import it.
//
// The behaviour is that of Nomad 1.9.7 to 2.0 (read in 1.9.7, 1.10.5, 1.11.3
// and 2.0.0, identical but for syntax): scheduler/feasible.go up to 1.10,
// scheduler/feasible/feasible.go since 1.11 (written "feasible.go" in the
// cases); helper/constraints/semver/constraints.go; nomad/structs/structs.go
// Constraint.Validate as of 1.10.5. Versions are parsed and go-version's
// constraints checked by github.com/hashicorp/go-version, which Nomad calls
// (v1.7.0 in 1.10, v1.8.0 in 1.11.3; their parsing and checks are the same as
// the v1.9.0 rollboot builds with).
package constrainttest

// Node is what a constraint's targets can interpolate on a Nomad node
// (resolveTarget): ${node.unique.id}, ${node.unique.name},
// ${node.datacenter}, ${node.class}, ${node.pool}, ${attr.<key>} and
// ${meta.<key>}.
type Node struct {
	ID, Name, Datacenter, Class, Pool string
	Attributes, Meta                  map[string]string
}

// Case is one constraint checked against one node.
type Case struct {
	Name                      string
	LTarget, Operand, RTarget string
	// Node is the node checked; nil means Client.
	Node *Node
	// Want is whether Nomad's ConstraintChecker finds the node feasible.
	Want bool
	// Nomad is the upstream behaviour the case follows.
	Nomad string
}

// On is the node the case is checked against.
func (c Case) On() Node {
	if c.Node == nil {
		return Client
	}
	return *c.Node
}

// Client is the node most cases are checked against.
var Client = Node{
	ID: "5c0ffee0-9f2c-4d1e-8a6b-3e2f1d0c9b8a", Name: "client-1", Datacenter: "dc1", Class: "web", Pool: "batch",
	Attributes: map[string]string{
		"kernel.name":              "linux",
		"cpu.arch":                 "amd64",
		"cpu.numcores":             "4",
		"cpu.frequency":            "2.5",
		"os.version":               "24.04",
		"nomad.version":            "1.10.3",
		"driver.docker.version":    "27.3.1-beta.2",
		"unique.storage.bytesfree": "9500000000",
		"big":                      "9007199254740993", // 2^53 + 1: not a float64
		"huge":                     "99999999999999999999",
		"neg":                      "-3",
		"plus":                     "+5",
		"exp":                      "1e3",
		"underscore":               "1_000",
		"hex":                      "0x10",
		"nan":                      "NaN",
		"inf":                      "Inf",
		"ver.meta":                 "1.3.0-beta1+ent",
		"ver.four":                 "1.2.3.4",
		"ver.v":                    "v2.1.0",
		"ver.nohyphen":             "1.10.0beta1",
		"ver.alpha":                "1.7.0-alpha1",
		"ver.ga":                   "1.7.0",
		"ver.beta":                 "1.7.0-beta",
		"ver.rc":                   "1.7.0-rc.1",
	},
	Meta: map[string]string{
		"rack":    "r1",
		"zones":   "a, b,c",
		"padded":  "  x , y  ",
		"empty":   "",
		"pattern": "^r[0-9]$",
		"range":   ">= 1.10, < 2",
	},
}

// Bare is a node with no attributes, no meta (nil maps), and empty class.
var Bare = Node{ID: "0bare000-0000-4000-8000-000000000000", Name: "bare", Datacenter: "dc2", Pool: "default"}

const (
	cc       = "feasible.go checkConstraint"
	resolve  = "feasible.go resolveTarget"
	order    = "feasible.go checkOrder"
	vmatch   = "feasible.go checkVersionMatch, newVersionConstraintParser (go-version NewVersion, NewConstraint)"
	smatch   = "feasible.go checkVersionMatch, newSemverConstraintParser (helper/constraints/semver NewConstraint)"
	rmatch   = "feasible.go checkRegexpMatch"
	setAll   = "feasible.go checkSetContainsAll"
	setAny   = "feasible.go checkSetContainsAny"
	missing  = "feasible.go meetsConstraint: a target resolveTarget does not find is \"\", not found"
	distinct = "feasible.go checkConstraint: distinct_hosts and distinct_property are left to their iterators"
)

// Cases is the table.
var Cases = []Case{
	// Equality: both targets found and equal.
	{Name: "= attribute", LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux", Want: true, Nomad: cc},
	{Name: "= differs", LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "windows", Want: false, Nomad: cc},
	{Name: "= is case-sensitive", LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "Linux", Want: false, Nomad: cc},
	{Name: "== meta", LTarget: "${meta.rack}", Operand: "==", RTarget: "r1", Want: true, Nomad: cc},
	{Name: "is node class", LTarget: "${node.class}", Operand: "is", RTarget: "web", Want: true, Nomad: cc},
	{Name: "= literal left, target right", LTarget: "dc1", Operand: "=", RTarget: "${node.datacenter}", Want: true, Nomad: cc + ", " + resolve},
	{Name: "= two literals", LTarget: "a", Operand: "=", RTarget: "a", Want: true, Nomad: resolve},
	{Name: "= two literals differ", LTarget: "a", Operand: "=", RTarget: "b", Want: false, Nomad: resolve},
	{Name: "= two targets", LTarget: "${meta.rack}", Operand: "=", RTarget: "${meta.rack}", Want: true, Nomad: cc},
	{Name: "= set to empty equals empty literal", LTarget: "${meta.empty}", Operand: "=", RTarget: "", Want: true, Nomad: cc},
	{Name: "= missing left", LTarget: "${attr.nope}", Operand: "=", RTarget: "linux", Want: false, Nomad: missing},
	{Name: "= missing right", LTarget: "linux", Operand: "=", RTarget: "${attr.nope}", Want: false, Nomad: missing},
	{Name: "= missing on both sides is not equal", LTarget: "${attr.nope}", Operand: "=", RTarget: "${meta.nope}", Want: false, Nomad: missing},
	{Name: "= missing against empty literal", LTarget: "${meta.nope}", Operand: "=", RTarget: "", Want: false, Nomad: missing},
	{Name: "= attr and meta are apart", LTarget: "${attr.rack}", Operand: "=", RTarget: "r1", Want: false, Nomad: resolve},
	{Name: "= node.region does not resolve", LTarget: "${node.region}", Operand: "=", RTarget: "global", Want: false, Nomad: resolve},
	{Name: "= unknown operator spelling", LTarget: "${meta.rack}", Operand: "IS", RTarget: "r1", Want: false, Nomad: cc + ": unknown operators are never met"},

	// Inequality: !reflect.DeepEqual, a missing target being "".
	{Name: "!= differs", LTarget: "${meta.rack}", Operand: "!=", RTarget: "r2", Want: true, Nomad: cc},
	{Name: "!= same", LTarget: "${meta.rack}", Operand: "!=", RTarget: "r1", Want: false, Nomad: cc},
	{Name: "not", LTarget: "${node.pool}", Operand: "not", RTarget: "default", Want: true, Nomad: cc},
	{Name: "!= missing left differs", LTarget: "${meta.nope}", Operand: "!=", RTarget: "r2", Want: true, Nomad: missing},
	{Name: "!= missing right differs", LTarget: "r2", Operand: "!=", RTarget: "${meta.nope}", Want: true, Nomad: missing},
	{Name: "!= both missing are equal", LTarget: "${meta.nope}", Operand: "!=", RTarget: "${attr.nope}", Want: false, Nomad: missing},
	{Name: "!= missing equals set-but-empty", LTarget: "${meta.nope}", Operand: "!=", RTarget: "${meta.empty}", Want: false, Nomad: missing},
	{Name: "!= missing equals empty literal", LTarget: "${meta.nope}", Operand: "!=", RTarget: "", Want: false, Nomad: missing},
	{Name: "!= node.region", LTarget: "${node.region}", Operand: "!=", RTarget: "global", Want: true, Nomad: missing},
	{Name: "not on a bare node", LTarget: "${attr.kernel.name}", Operand: "not", RTarget: "linux", Node: &Bare, Want: true, Nomad: missing},

	// Order: integers, else floats, else bytes.
	{Name: "< integers", LTarget: "${attr.cpu.numcores}", Operand: "<", RTarget: "16", Want: true, Nomad: order + ": checkIntegralOrder"},
	{Name: "> integers numerically, not lexically", LTarget: "${attr.cpu.numcores}", Operand: ">", RTarget: "16", Want: false, Nomad: order + ": checkIntegralOrder"},
	{Name: ">= integers equal", LTarget: "${attr.cpu.numcores}", Operand: ">=", RTarget: "4", Want: true, Nomad: order},
	{Name: "<= integers equal", LTarget: "${attr.cpu.numcores}", Operand: "<=", RTarget: "4", Want: true, Nomad: order},
	{Name: "< integers equal", LTarget: "${attr.cpu.numcores}", Operand: "<", RTarget: "4", Want: false, Nomad: order},
	{Name: "<= large integers", LTarget: "${attr.unique.storage.bytesfree}", Operand: "<=", RTarget: "10000000000", Want: true, Nomad: order + ": checkIntegralOrder"},
	{Name: "> integers beyond float64 precision", LTarget: "${attr.big}", Operand: ">", RTarget: "9007199254740992", Want: true, Nomad: order + ": checkIntegralOrder before checkFloatOrder"},
	{Name: "< negative integers", LTarget: "${attr.neg}", Operand: "<", RTarget: "-2", Want: true, Nomad: order + ": checkIntegralOrder"},
	{Name: "> signed integer", LTarget: "${attr.plus}", Operand: ">", RTarget: "4", Want: true, Nomad: order + ": strconv.ParseInt takes a sign"},
	{Name: "> floats", LTarget: "${attr.cpu.frequency}", Operand: ">", RTarget: "2.25", Want: true, Nomad: order + ": checkFloatOrder"},
	{Name: "< float against integer", LTarget: "${attr.cpu.frequency}", Operand: "<", RTarget: "3", Want: true, Nomad: order + ": checkFloatOrder"},
	{Name: "< floats numerically, not lexically", LTarget: "${attr.cpu.frequency}", Operand: "<", RTarget: "10.25", Want: true, Nomad: order + ": checkFloatOrder"},
	{Name: "< integer beyond int64 as float", LTarget: "${attr.huge}", Operand: "<", RTarget: "200000000000000000000", Want: true, Nomad: order + ": checkFloatOrder"},
	{Name: "> exponent notation is a float", LTarget: "${attr.exp}", Operand: ">", RTarget: "999", Want: true, Nomad: order + ": checkFloatOrder (strconv.ParseFloat)"},
	{Name: "> underscores parse as a float", LTarget: "${attr.underscore}", Operand: ">", RTarget: "2", Want: true, Nomad: order + ": checkFloatOrder (strconv.ParseFloat)"},
	{Name: "> hex without exponent is lexical", LTarget: "${attr.hex}", Operand: ">", RTarget: "9", Want: false, Nomad: order + ": checkLexicalOrder"},
	{Name: "> infinity", LTarget: "${attr.inf}", Operand: ">", RTarget: "1e308", Want: true, Nomad: order + ": checkFloatOrder"},
	{Name: "< NaN is unordered", LTarget: "${attr.nan}", Operand: "<", RTarget: "1", Want: false, Nomad: order + ": compareOrder on float64, NaN compares false"},
	{Name: "> NaN is unordered", LTarget: "${attr.nan}", Operand: ">", RTarget: "1", Want: false, Nomad: order + ": compareOrder on float64, NaN compares false"},
	{Name: ">= NaN against itself", LTarget: "${attr.nan}", Operand: ">=", RTarget: "${attr.nan}", Want: false, Nomad: order + ": compareOrder on float64, NaN compares false"},
	{Name: "<= against NaN", LTarget: "1", Operand: "<=", RTarget: "NaN", Want: false, Nomad: order + ": compareOrder on float64, NaN compares false"},
	{Name: "< lexical", LTarget: "${meta.rack}", Operand: "<", RTarget: "r2", Want: true, Nomad: order + ": checkLexicalOrder"},
	{Name: ">= lexical", LTarget: "${meta.rack}", Operand: ">=", RTarget: "r09", Want: true, Nomad: order + ": checkLexicalOrder"},
	{Name: "< lexical prefix", LTarget: "${meta.rack}", Operand: "<", RTarget: "r10", Want: true, Nomad: order + ": checkLexicalOrder"},
	{Name: "> lexical false", LTarget: "${node.class}", Operand: ">", RTarget: "zz", Want: false, Nomad: order + ": checkLexicalOrder"},
	{Name: "> number against word is lexical", LTarget: "1", Operand: ">", RTarget: "foo", Want: false, Nomad: order + ": checkLexicalOrder"},
	{Name: "< lexical version strings", LTarget: "${attr.nomad.version}", Operand: "<", RTarget: "1.9.0", Want: true, Nomad: order + ": checkLexicalOrder (no version order)"},
	{Name: "< set-but-empty is found", LTarget: "${meta.empty}", Operand: "<", RTarget: "a", Want: true, Nomad: order + ": checkLexicalOrder"},
	{Name: "< missing left", LTarget: "${meta.nope}", Operand: "<", RTarget: "z", Want: false, Nomad: missing},
	{Name: ">= missing right", LTarget: "a", Operand: ">=", RTarget: "${meta.nope}", Want: false, Nomad: missing},
	{Name: "<= missing both", LTarget: "${meta.nope}", Operand: "<=", RTarget: "${attr.nope}", Want: false, Nomad: missing},

	// is_set, is_not_set: whether the left target is found.
	{Name: "is_set", LTarget: "${meta.rack}", Operand: "is_set", Want: true, Nomad: cc},
	{Name: "is_set with an empty value", LTarget: "${meta.empty}", Operand: "is_set", Want: true, Nomad: cc},
	{Name: "is_set missing", LTarget: "${meta.nope}", Operand: "is_set", Want: false, Nomad: missing},
	{Name: "is_set a literal", LTarget: "x", Operand: "is_set", Want: true, Nomad: resolve},
	{Name: "is_set ignores the right side", LTarget: "${meta.rack}", Operand: "is_set", RTarget: "${meta.nope}", Want: true, Nomad: cc},
	{Name: "is_set empty node class", LTarget: "${node.class}", Operand: "is_set", Node: &Bare, Want: true, Nomad: resolve + ": node fields are always found"},
	{Name: "= empty node class", LTarget: "${node.class}", Operand: "=", RTarget: "", Node: &Bare, Want: true, Nomad: resolve + ": node fields are always found"},
	{Name: "is_set on nil attributes", LTarget: "${attr.kernel.name}", Operand: "is_set", Node: &Bare, Want: false, Nomad: missing},
	{Name: "is_not_set missing", LTarget: "${meta.nope}", Operand: "is_not_set", Want: true, Nomad: missing},
	{Name: "is_not_set present", LTarget: "${attr.kernel.name}", Operand: "is_not_set", Want: false, Nomad: cc},
	{Name: "is_not_set unresolvable interpolation", LTarget: "${node.region}", Operand: "is_not_set", Want: true, Nomad: missing},
	{Name: "is_not_set on nil meta", LTarget: "${meta.rack}", Operand: "is_not_set", Node: &Bare, Want: true, Nomad: missing},

	// version: a lenient version against go-version's constraints.
	{Name: "version >=", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">= 1.9.0", Want: true, Nomad: vmatch},
	{Name: "version list", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">= 1.10, < 1.11", Want: true, Nomad: vmatch},
	{Name: "version list with spaces", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: " >= 1.2 ,  < 2 ", Want: true, Nomad: vmatch},
	{Name: "version list fails one", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">= 1.2, < 1.10", Want: false, Nomad: vmatch},
	{Name: "version pessimistic no", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "~> 1.9.0", Want: false, Nomad: vmatch},
	{Name: "version pessimistic yes", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "~> 1.10", Want: true, Nomad: vmatch},
	{Name: "version no operator is =", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "1.10.3", Want: true, Nomad: vmatch},
	{Name: "version trailing zero segment is equal", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "= 1.10.3.0", Want: true, Nomad: vmatch},
	{Name: "version fewer segments is not equal", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "= 1.10", Want: false, Nomad: vmatch},
	{Name: "version lenient left (two segments)", LTarget: "${attr.os.version}", Operand: "version", RTarget: "> 22.04", Want: true, Nomad: vmatch},
	{Name: "version four segments", LTarget: "${attr.ver.four}", Operand: "version", RTarget: "> 1.2.3", Want: true, Nomad: vmatch},
	{Name: "version v prefix", LTarget: "${attr.ver.v}", Operand: "version", RTarget: ">= 2", Want: true, Nomad: vmatch},
	{Name: "version pre-release never meets a release range", LTarget: "${attr.driver.docker.version}", Operand: "version", RTarget: ">= 27.0", Want: false, Nomad: vmatch + ": prereleaseCheck"},
	{Name: "version pre-release against its own base", LTarget: "${attr.driver.docker.version}", Operand: "version", RTarget: ">= 27.3.1-beta.1", Want: true, Nomad: vmatch + ": prereleaseCheck"},
	{Name: "version pre-release of another base", LTarget: "${attr.ver.alpha}", Operand: "version", RTarget: ">= 1.6.0-beta1", Want: false, Nomad: vmatch + ": prereleaseCheck"},
	{Name: "version release against a pre-release constraint", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">= 1.10.0beta1", Want: true, Nomad: vmatch + ": pre-release without hyphen is valid"},
	{Name: "version build metadata ignored", LTarget: "${attr.ver.meta}", Operand: "version", RTarget: "= 1.3.0-beta1", Want: true, Nomad: vmatch},
	{Name: "version constraint from meta", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "${meta.range}", Want: true, Nomad: vmatch + ", " + resolve},
	{Name: "version invalid constraint", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">>> 1", Want: false, Nomad: vmatch + ": a constraint that does not parse is never met"},
	{Name: "version empty constraint", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "", Want: false, Nomad: vmatch},
	{Name: "version trailing comma", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: ">= 1.0,", Want: false, Nomad: vmatch},
	{Name: "version invalid left", LTarget: "${meta.rack}", Operand: "version", RTarget: ">= 1.0", Want: false, Nomad: vmatch},
	{Name: "version empty left", LTarget: "${meta.empty}", Operand: "version", RTarget: ">= 0", Want: false, Nomad: vmatch},
	{Name: "version missing left", LTarget: "${attr.nope}", Operand: "version", RTarget: ">= 1.0", Want: false, Nomad: missing},
	{Name: "version missing right", LTarget: "${attr.nomad.version}", Operand: "version", RTarget: "${meta.nope}", Want: false, Nomad: missing},

	// semver: a lenient version against strict Semantic Versioning constraints.
	{Name: "semver >=", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.10.0", Want: true, Nomad: smatch},
	{Name: "semver list", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.0, < 1.11", Want: true, Nomad: smatch},
	{Name: "semver list fails one", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">1.9.0,<1.10.3", Want: false, Nomad: smatch},
	{Name: "semver blanks around", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: " >= 1.0.0 ,\t< 2.0.0\r\n", Want: true, Nomad: smatch + ": \\s is space, \\t, \\n, \\f, \\r"},
	{Name: "semver no-break space is not blank", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.0.0\u00a0", Want: false, Nomad: smatch + ": RE2's \\s is ASCII only, so the constraint is malformed"},
	{Name: "semver vertical tab is not blank", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "\v>= 1.0.0", Want: false, Nomad: smatch + ": RE2's \\s has no \\v"},
	{Name: "semver no operator is =", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "1.10.3", Want: true, Nomad: smatch},
	{Name: "semver =", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "=1.10.3", Want: true, Nomad: smatch},
	{Name: "semver !=", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "!= 1.10.3", Want: false, Nomad: smatch},
	{Name: "semver <=", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "<= 1.10.3", Want: true, Nomad: smatch},
	{Name: "semver short version", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.10", Want: true, Nomad: smatch},
	{Name: "semver v prefix", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= v1.0.0", Want: true, Nomad: smatch},
	{Name: "semver pre-release by precedence", LTarget: "${attr.driver.docker.version}", Operand: "semver", RTarget: ">= 27.0.0", Want: true, Nomad: smatch},
	{Name: "semver pre-release below its release", LTarget: "${attr.driver.docker.version}", Operand: "semver", RTarget: "< 27.3.1", Want: true, Nomad: smatch},
	{Name: "semver pre-release of the same version", LTarget: "${attr.ver.beta}", Operand: "semver", RTarget: ">= 1.7.0", Want: false, Nomad: smatch},
	{Name: "semver pre-release of another base", LTarget: "${attr.ver.alpha}", Operand: "semver", RTarget: ">= 1.6.0-beta1", Want: true, Nomad: smatch},
	{Name: "semver release above its pre-release", LTarget: "${attr.ver.ga}", Operand: "semver", RTarget: ">= 1.7.0-dev", Want: true, Nomad: smatch},
	{Name: "semver pre-releases by identifier", LTarget: "${attr.ver.rc}", Operand: "semver", RTarget: ">= 1.7.0-dev", Want: true, Nomad: smatch},
	{Name: "semver build metadata ignored", LTarget: "${attr.ver.meta}", Operand: "semver", RTarget: "= 1.3.0-beta1", Want: true, Nomad: smatch},
	{Name: "semver lenient left", LTarget: "${attr.ver.nohyphen}", Operand: "semver", RTarget: "< 1.10.0", Want: true, Nomad: smatch + ": the node's version is parsed with version.NewVersion"},
	{Name: "semver pre-release needs a hyphen", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.10.0beta1", Want: false, Nomad: smatch + ": a constraint that does not parse is never met"},
	{Name: "semver has no ~>", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "~> 1.10.0", Want: false, Nomad: smatch},
	{Name: "semver trailing comma", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: ">= 1.0.0,", Want: false, Nomad: smatch},
	{Name: "semver operator split by a blank", LTarget: "${attr.nomad.version}", Operand: "semver", RTarget: "> = 1.0.0", Want: false, Nomad: smatch},
	{Name: "semver invalid left", LTarget: "${meta.rack}", Operand: "semver", RTarget: ">= 1.0.0", Want: false, Nomad: smatch},
	{Name: "semver missing left", LTarget: "${attr.nope}", Operand: "semver", RTarget: ">= 1.0.0", Want: false, Nomad: missing},

	// regexp: Go's RE2, unanchored unless the expression anchors it.
	{Name: "regexp anchored", LTarget: "${attr.cpu.arch}", Operand: "regexp", RTarget: "^(amd|arm)64$", Want: true, Nomad: rmatch},
	{Name: "regexp unanchored matches inside", LTarget: "${node.unique.name}", Operand: "regexp", RTarget: "ent-", Want: true, Nomad: rmatch},
	{Name: "regexp start anchor", LTarget: "${attr.cpu.arch}", Operand: "regexp", RTarget: "^arm", Want: false, Nomad: rmatch},
	{Name: "regexp end anchor", LTarget: "${attr.cpu.arch}", Operand: "regexp", RTarget: "md$", Want: false, Nomad: rmatch},
	{Name: "regexp flags", LTarget: "${attr.kernel.name}", Operand: "regexp", RTarget: "(?i)^LINUX$", Want: true, Nomad: rmatch},
	{Name: "regexp empty value matches ^$", LTarget: "${meta.empty}", Operand: "regexp", RTarget: "^$", Want: true, Nomad: rmatch},
	{Name: "regexp empty expression matches anything", LTarget: "${meta.rack}", Operand: "regexp", RTarget: "", Want: true, Nomad: rmatch},
	{Name: "regexp from meta", LTarget: "${meta.rack}", Operand: "regexp", RTarget: "${meta.pattern}", Want: true, Nomad: rmatch + ", " + resolve},
	{Name: "regexp invalid", LTarget: "${attr.cpu.arch}", Operand: "regexp", RTarget: "(", Want: false, Nomad: rmatch + ": one that does not compile matches nothing"},
	{Name: "regexp backreference is not RE2", LTarget: "${attr.cpu.arch}", Operand: "regexp", RTarget: `(a)\1`, Want: false, Nomad: rmatch + ": regexp.Compile"},
	{Name: "regexp missing left matches not even ^$", LTarget: "${meta.nope}", Operand: "regexp", RTarget: "^$", Want: false, Nomad: missing},
	{Name: "regexp missing right", LTarget: "${meta.rack}", Operand: "regexp", RTarget: "${meta.nope}", Want: false, Nomad: missing},

	// set_contains (set_contains_all), set_contains_any: comma-separated,
	// each item trimmed of white space.
	{Name: "set_contains", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "a,c", Want: true, Nomad: setAll},
	{Name: "set_contains_all with spaces", LTarget: "${meta.zones}", Operand: "set_contains_all", RTarget: "  b ,  c ", Want: true, Nomad: setAll},
	{Name: "set_contains_all both sides padded", LTarget: "${meta.padded}", Operand: "set_contains_all", RTarget: "y,x", Want: true, Nomad: setAll},
	{Name: "set_contains_all lacks one", LTarget: "${meta.zones}", Operand: "set_contains_all", RTarget: "a,d", Want: false, Nomad: setAll},
	{Name: "set_contains single item", LTarget: "${attr.kernel.name}", Operand: "set_contains", RTarget: "linux", Want: true, Nomad: setAll},
	{Name: "set_contains items trimmed", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "a, b", Want: true, Nomad: setAll},
	{Name: "set_contains items are whole", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "a b", Want: false, Nomad: setAll},
	{Name: "set_contains is case-sensitive", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "A", Want: false, Nomad: setAll},
	{Name: "set_contains empty item", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "a,", Want: false, Nomad: setAll + ": the empty item is not in the set"},
	{Name: "set_contains empty in empty", LTarget: "${meta.empty}", Operand: "set_contains", RTarget: "", Want: true, Nomad: setAll},
	{Name: "set_contains repeated item", LTarget: "${meta.zones}", Operand: "set_contains", RTarget: "a,a", Want: true, Nomad: setAll},
	{Name: "set_contains missing left", LTarget: "${meta.nope}", Operand: "set_contains", RTarget: "a", Want: false, Nomad: missing},
	{Name: "set_contains_all missing right", LTarget: "${meta.zones}", Operand: "set_contains_all", RTarget: "${meta.nope}", Want: false, Nomad: missing},
	{Name: "set_contains_any", LTarget: "${meta.zones}", Operand: "set_contains_any", RTarget: "d, b", Want: true, Nomad: setAny},
	{Name: "set_contains_any none", LTarget: "${meta.zones}", Operand: "set_contains_any", RTarget: "d,e", Want: false, Nomad: setAny},
	{Name: "set_contains_any padded", LTarget: "${meta.padded}", Operand: "set_contains_any", RTarget: " y ", Want: true, Nomad: setAny},
	{Name: "set_contains_any empty items", LTarget: "${meta.zones}", Operand: "set_contains_any", RTarget: ",", Want: false, Nomad: setAny},
	{Name: "set_contains_any missing left", LTarget: "${meta.nope}", Operand: "set_contains_any", RTarget: "a", Want: false, Nomad: missing},

	// Targets.
	{Name: "node.unique.id", LTarget: "${node.unique.id}", Operand: "=", RTarget: "5c0ffee0-9f2c-4d1e-8a6b-3e2f1d0c9b8a", Want: true, Nomad: resolve},
	{Name: "node.unique.name", LTarget: "${node.unique.name}", Operand: "=", RTarget: "client-1", Want: true, Nomad: resolve},
	{Name: "node.datacenter", LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Want: true, Nomad: resolve},
	{Name: "node.datacenter other node", LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Node: &Bare, Want: false, Nomad: resolve},
	{Name: "node.class", LTarget: "${node.class}", Operand: "=", RTarget: "web", Want: true, Nomad: resolve},
	{Name: "node.pool", LTarget: "${node.pool}", Operand: "=", RTarget: "batch", Want: true, Nomad: resolve},
	{Name: "node.pool against another", LTarget: "${node.pool}", Operand: "!=", RTarget: "batch", Node: &Bare, Want: true, Nomad: resolve},
	{Name: "attr", LTarget: "${attr.cpu.arch}", Operand: "=", RTarget: "amd64", Want: true, Nomad: resolve},
	{Name: "meta", LTarget: "${meta.rack}", Operand: "=", RTarget: "r1", Want: true, Nomad: resolve},
	{Name: "node target against node target", LTarget: "${node.unique.name}", Operand: "!=", RTarget: "${node.class}", Want: true, Nomad: resolve},
	{Name: "node target without closing brace", LTarget: "${node.class", Operand: "is_not_set", Want: true, Nomad: resolve + ": node fields match exactly"},
	{Name: "attr without closing brace still resolves", LTarget: "${attr.kernel.name", Operand: "=", RTarget: "linux", Want: true, Nomad: resolve + ": TrimSuffix of \"}\" is a no-op"},
	{Name: "meta with two closing braces", LTarget: "${meta.rack}}", Operand: "is_set", Want: false, Nomad: resolve + ": only one brace is trimmed"},
	{Name: "attr with empty key", LTarget: "${attr.}", Operand: "is_set", Want: false, Nomad: resolve},
	{Name: "node.foo does not resolve", LTarget: "${node.foo}", Operand: "is_not_set", Want: true, Nomad: resolve},
	{Name: "interpolation names are case-sensitive", LTarget: "${NODE.CLASS}", Operand: "is_set", Want: false, Nomad: resolve},
	{Name: "blank inside the braces", LTarget: "${ attr.kernel.name}", Operand: "is_set", Want: false, Nomad: resolve},
	{Name: "env interpolation does not resolve", LTarget: "${env.HOME}", Operand: "is_set", Want: false, Nomad: resolve},
	{Name: "dollar without brace is a literal", LTarget: "$attr.kernel.name", Operand: "=", RTarget: "$attr.kernel.name", Want: true, Nomad: resolve},
	{Name: "dollar without brace is not the attribute", LTarget: "$attr.kernel.name", Operand: "=", RTarget: "linux", Want: false, Nomad: resolve},
	{Name: "interpolation inside a literal is literal", LTarget: "x${meta.rack}", Operand: "=", RTarget: "x${meta.rack}", Want: true, Nomad: resolve},
	{Name: "empty literal left", LTarget: "", Operand: "=", RTarget: "", Want: true, Nomad: resolve},

	// Operators decided elsewhere, and unknown ones.
	{Name: "distinct_hosts passes", Operand: "distinct_hosts", RTarget: "true", Want: true, Nomad: distinct},
	{Name: "distinct_hosts passes on a bare node", Operand: "distinct_hosts", Node: &Bare, Want: true, Nomad: distinct},
	{Name: "distinct_property passes", LTarget: "${meta.rack}", Operand: "distinct_property", RTarget: "1", Want: true, Nomad: distinct},
	{Name: "distinct_property passes without the property", LTarget: "${meta.nope}", Operand: "distinct_property", Want: true, Nomad: distinct},
	{Name: "unknown operator", LTarget: "${meta.rack}", Operand: "near", RTarget: "r1", Want: false, Nomad: cc + ": unknown operators are never met"},
	{Name: "empty operator", LTarget: "${meta.rack}", Operand: "", RTarget: "r1", Want: false, Nomad: cc + ": unknown operators are never met"},
	{Name: "operator with blanks", LTarget: "${meta.rack}", Operand: " = ", RTarget: "r1", Want: false, Nomad: cc + ": unknown operators are never met"},
}

// DistinctHostsCase is a constraint block (a job's or a task group's) and
// whether it asks for distinct hosts.
type DistinctHostsCase struct {
	Name string
	// Values are the values of the block's distinct_hosts constraints, in
	// order; Others is how many other constraints precede them.
	Values []string
	Others int
	Want   bool
	Nomad  string
}

const dh = "feasible.go DistinctHostsIterator.hasDistinctHostsConstraint"

// DistinctHostsCases is the table of distinct_hosts values.
var DistinctHostsCases = []DistinctHostsCase{
	{Name: "none", Want: false, Nomad: dh},
	{Name: "none among others", Others: 2, Want: false, Nomad: dh},
	{Name: "no value", Values: []string{""}, Want: true, Nomad: dh + ": defaults to true"},
	{Name: "true", Values: []string{"true"}, Want: true, Nomad: dh},
	{Name: "false", Values: []string{"false"}, Want: false, Nomad: dh},
	{Name: "1", Values: []string{"1"}, Want: true, Nomad: dh + ": strconv.ParseBool"},
	{Name: "0", Values: []string{"0"}, Want: false, Nomad: dh + ": strconv.ParseBool"},
	{Name: "F", Values: []string{"F"}, Want: false, Nomad: dh + ": strconv.ParseBool"},
	{Name: "FALSE", Values: []string{"FALSE"}, Want: false, Nomad: dh + ": strconv.ParseBool"},
	{Name: "not a boolean enforces", Values: []string{"yes please"}, Want: true, Nomad: dh + ": unparsable keeps the old behaviour"},
	{Name: "padded false is not a boolean", Values: []string{" false"}, Want: true, Nomad: dh + ": unparsable keeps the old behaviour"},
	{Name: "after other constraints", Values: []string{"true"}, Others: 1, Want: true, Nomad: dh},
	{Name: "the first decides: false then true", Values: []string{"false", "true"}, Want: false, Nomad: dh + ": returns at the first"},
	{Name: "the first decides: true then false", Values: []string{"", "false"}, Want: true, Nomad: dh + ": returns at the first"},
}

// ValidateCase is a constraint and whether Nomad accepts it in a job at
// submit.
type ValidateCase struct {
	LTarget, Operand, RTarget string
	// Valid is whether Nomad accepts it.
	Valid bool
	Nomad string
}

const validate = "nomad/structs/structs.go Constraint.Validate (1.10.5)"

// ValidateCases is the table of what Nomad refuses at submit.
var ValidateCases = []ValidateCase{
	{"${meta.rack}", "=", "r1", true, validate},
	{"${meta.rack}", "!=", "", false, validate},
	{"${meta.rack}", ">=", "", false, validate},
	{"${meta.rack}", "", "r1", false, validate + ": also an unknown type"},
	{"${meta.rack}", "near", "r1", false, validate},
	{"${meta.rack}", "IS", "r1", false, validate},
	{"", "=", "r1", false, validate},
	{"", "is_set", "", false, validate},
	{"", "distinct_hosts", "", true, validate + ": distinct_hosts needs no attribute"},
	{"${meta.rack}", "distinct_hosts", "true", true, validate},
	{"", "distinct_property", "", false, validate},
	{"${meta.rack}", "distinct_property", "", true, validate},
	{"${meta.rack}", "distinct_property", "2", true, validate},
	{"${meta.rack}", "distinct_property", "0", false, validate + ": a count of 1 or more"},
	{"${meta.rack}", "distinct_property", "-1", false, validate + ": strconv.ParseUint"},
	{"${meta.rack}", "distinct_property", "two", false, validate + ": strconv.ParseUint"},
	{"${meta.rack}", "is_set", "x", false, validate},
	{"${meta.rack}", "is_not_set", "", true, validate},
	{"${meta.rack}", "regexp", "(", false, validate},
	{"${meta.rack}", "regexp", "", true, validate + ": the empty expression compiles"},
	{"${attr.nomad.version}", "version", "foo", false, validate},
	{"${attr.nomad.version}", "version", "", false, validate},
	{"${attr.nomad.version}", "version", "~> 1.10, != 1.10.2", true, validate},
	{"${attr.nomad.version}", "semver", ">= 1.10.0beta1", false, validate},
	{"${attr.nomad.version}", "semver", "~> 1.10.0", false, validate},
	{"${attr.nomad.version}", "semver", ">= 1.0.0\u00a0", false, validate + ": RE2's \\s is ASCII only"},
	{"${attr.nomad.version}", "semver", ">= 1.10.0, < 2.0.0", true, validate},
	{"${meta.zones}", "set_contains_any", "", false, validate},
	{"${meta.zones}", "set_contains", "a", true, validate},
	{"${node.region}", "=", "global", true, validate + ": the attribute's syntax is checked only since 1.11.2"},
}

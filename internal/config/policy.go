package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/rollboot/rollboot/internal/policy"
)

// The settings are split in two. A host's local file holds what is local to the
// host and its connection: nomad, state, agent, telemetry, fleetlock, notify,
// and the coordinator's election and deployment settings. The rollout policy
// holds what every coordinator must decide alike: the group, window, drain,
// alerts, workloads, capacity, healthy, silence, gate and node_meta blocks and the
// coordinator's rollout rules. The tables say which is which (section.policy, setting.policy). The
// policy is stored in the cluster (`rollboot policy apply`), never read from a
// local file.

// fileKind is which settings a file may hold.
type fileKind int

const (
	localFile fileKind = iota
	policyFile
)

// Messages for a setting in the wrong kind of file.
const (
	inLocalMsg  = "%s is a rollout policy setting, stored in the cluster: move it to a policy file and run `rollboot policy apply FILE`"
	inPolicyMsg = "%s is a local setting of each host, not a policy one: set it in the agent's or coordinator's configuration file"
)

// checkBlock reports a top-level block that does not belong in the file, and
// returns whether it does.
func (d *decoder) checkBlock(b *hcl.Block) bool {
	sec := sectionOf(b.Type)
	if sec.t.mixed() {
		return true // its attributes are checked one by one
	}
	name := b.Type
	if len(b.Labels) > 0 {
		name = fmt.Sprintf("%s %q", b.Type, b.Labels[0])
	}
	return d.checkPlace(b.DefRange, name+" block", sec.policy)
}

// checkAttr reports an attribute of a block of both kinds (the coordinator's)
// that does not belong in the file, and returns whether it does.
func (d *decoder) checkAttr(at *hcl.Attribute, name string, isPolicy bool) bool {
	return d.checkPlace(at.NameRange, name, isPolicy)
}

func (d *decoder) checkPlace(rng hcl.Range, what string, isPolicy bool) bool {
	switch {
	case isPolicy && d.kind == localFile:
		d.errorf(rng, inLocalMsg, what)
		return false
	case !isPolicy && d.kind == policyFile:
		d.errorf(rng, inPolicyMsg, what)
		return false
	}
	return true
}

// PolicyFile is a parsed policy file, not yet checked: the rollout rules over
// their defaults. CompilePolicy checks it.
type PolicyFile struct {
	c *Config
}

// ParsePolicy reads a policy file (HCL JSON if filename ends in ".json"): group,
// window and drain blocks and a coordinator block with the rollout rules. It
// fails only when src is not HCL; every other problem (a local setting, a value
// that cannot be decoded) is reported by CompilePolicy with the others, each
// with its file:line:col.
func ParsePolicy(src []byte, filename string) (*PolicyFile, error) {
	file, err := parseHCL(src, filename)
	if err != nil {
		return nil, err
	}
	return &PolicyFile{c: decodeFile(file, policyFile)}, nil
}

// Rules is a checked policy: the settings of a Config that belong to the
// policy, and what Compile makes of them.
type Rules struct {
	c  *Config
	cc *Compiled
}

// CompilePolicy checks the policy and compiles it, reporting every problem at
// once as Errors with the file:line:col of each.
func CompilePolicy(p *PolicyFile) (*Rules, error) {
	cc, err := Compile(p.c)
	if err != nil {
		return nil, err
	}
	return &Rules{c: p.c, cc: cc}, nil
}

// DefaultRules is the policy with no file: one group "default" of concurrency
// 1, no window (always open), and the default drain and rollout rules. The
// coordinator enforces it while no policy is stored.
func DefaultRules() *Rules {
	r, err := CompilePolicy(&PolicyFile{c: Default()})
	if err != nil {
		panic("config: the default policy does not compile: " + err.Error())
	}
	return r
}

// With returns a copy of the local configuration cc with the rules of r in
// place of its policy settings.
func (cc *Compiled) With(r *Rules) *Compiled {
	out := *cc
	p := r.cc
	dst, src := reflect.ValueOf(&out.Config).Elem(), reflect.ValueOf(&p.Config).Elem()
	for _, sec := range sections {
		if sec.policy {
			fieldOf(dst, sec.field).Set(fieldOf(src, sec.field))
			continue
		}
		for _, row := range sec.t.settings {
			if row.policy {
				fieldOf(fieldOf(dst, sec.field), row.field).Set(fieldOf(fieldOf(src, sec.field), row.field))
			}
		}
	}
	out.Policy, out.ForceDrains, out.HoldOnDeniedHandOver = p.Policy, p.ForceDrains, p.HoldOnDeniedHandOver
	out.AlertGate, out.HealthGates = p.AlertGate, p.HealthGates
	out.FailureBudgets, out.RolloutBudget = p.FailureBudgets, p.RolloutBudget
	return &out
}

// InheritedWindows warns of the groups that name no windows in a file where
// other groups do: such a group inherits every window of the file (the
// default), which reads as "always open" but closes it outside them. One
// warning per group; none when no group names windows (every group then
// shares the file's windows, as the reader expects) or there is no window.
func (r *Rules) InheritedWindows() []string {
	var all []string
	for _, w := range r.c.Windows {
		all = append(all, strconv.Quote(w.Name))
	}
	named := false
	for _, g := range r.c.Groups {
		named = named || len(g.Windows) > 0
	}
	if len(all) == 0 || !named {
		return nil
	}
	var out []string
	for _, g := range r.c.Groups {
		if len(g.Windows) == 0 {
			out = append(out, fmt.Sprintf("group %q names no windows: it inherits every window of the file (%s), so its drains start only inside them; set `windows` on it to say which",
				g.Name, strings.Join(all, ", ")))
		}
	}
	return out
}

// String renders the policy's settings in HCL, defaults included, in a stable
// order: two policies differ in a setting when their renderings differ in its
// line (storedpolicy.DiffSettings compares them so).
func (r *Rules) String() string { return r.c.policyString() }

// Policy is the compiled groups of the rules, in match order, and the default
// group.
func (r *Rules) Policy() policy.Policy { return r.cc.Policy }

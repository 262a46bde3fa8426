package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/rollboot/rollboot/internal/policy"
)

// The settings are split in two. A host's local file holds what is local to the
// host and its connection: nomad, state, agent, telemetry, fleetlock, and the
// coordinator's election and deployment settings (enabled, lock_ttl,
// standbys, resync_interval, agent_job, agent_job_namespace, node_meta). The rollout policy holds
// what every coordinator must decide alike: group, window and drain blocks and
// the coordinator's rollout rules (policyCoordinatorAttr). The policy is stored
// in the cluster (`rollboot policy apply`), never read from a local file.

// fileKind is which settings a file may hold.
type fileKind int

const (
	localFile fileKind = iota
	policyFile
)

// policyBlocks are the top-level blocks of a policy file; every other block
// (but coordinator, shared) is local.
var policyBlocks = map[string]bool{"group": true, "window": true, "drain": true, "alerts": true, "workloads": true, "capacity": true, "healthy": true}

// policyCoordinatorAttr are the attributes of the coordinator block that belong
// to the policy; the others are local.
var policyCoordinatorAttr = map[string]bool{
	"rejoin_timeout": true, "server_stable_for": true, "leader_transfer_denied": true,
	"reboot_loop_backoff": true, "reboot_loop_max_backoff": true, "history_size": true,
}

// Messages for a setting in the wrong kind of file.
const (
	inLocalMsg  = "%s is a rollout policy setting, stored in the cluster: move it to a policy file and run `rollboot policy apply FILE`"
	inPolicyMsg = "%s is a local setting of each host, not a policy one: set it in the agent's or coordinator's configuration file"
)

// checkBlock reports a top-level block that does not belong in the file, and
// returns whether it does.
func (d *decoder) checkBlock(b *hcl.Block) bool {
	if b.Type == "coordinator" {
		return true // its attributes are checked one by one
	}
	name := b.Type
	if len(b.Labels) > 0 {
		name = fmt.Sprintf("%s %q", b.Type, b.Labels[0])
	}
	return d.checkPlace(b.DefRange, name+" block", policyBlocks[b.Type])
}

// checkAttr reports an attribute of the coordinator block that does not belong
// in the file, and returns whether it does.
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
	out.Groups, out.Windows, out.Drain = p.Groups, p.Windows, p.Drain
	out.Healthy = p.Healthy
	co, pco := &out.Coordinator, p.Coordinator
	co.RejoinTimeout, co.ServerStableFor, co.LeaderTransferDenied = pco.RejoinTimeout, pco.ServerStableFor, pco.LeaderTransferDenied
	co.RebootLoopBackoff, co.RebootLoopMaxBackoff, co.HistorySize = pco.RebootLoopBackoff, pco.RebootLoopMaxBackoff, pco.HistorySize
	out.Policy, out.ForceDrains, out.HoldOnDeniedHandOver = p.Policy, p.ForceDrains, p.HoldOnDeniedHandOver
	out.Alerts, out.AlertGate = p.Alerts, p.AlertGate
	out.Workloads = p.Workloads
	out.Capacity = p.Capacity
	return &out
}

// String renders the policy's settings in HCL, defaults included, in a stable
// order: two policies differ in a setting when their renderings differ in its
// line (storedpolicy.DiffSettings compares them so).
func (r *Rules) String() string { return r.c.policyString() }

// Policy is the compiled groups of the rules, in match order, and the default
// group.
func (r *Rules) Policy() policy.Policy { return r.cc.Policy }

package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// NodeMetaConfig is the policy's `node_meta {}` block: what rollboot writes
// on the nodes' dynamic metadata beside its own keys, so that jobs can steer
// away from nodes about to be drained, and operators can mark nodes before a
// drain and after the host is back (package nodemeta).
type NodeMetaConfig struct {
	// NextInLine is how many of each group's pending hosts, in the order
	// they will be granted, get rollboot_next = "true" (0: the key is
	// removed).
	NextInLine int
	// CordonNext is how many of each group's hosts next in line get their
	// node marked ineligible before their drain, capacity permitting (0:
	// none).
	CordonNext int
	// BeforeDrain and AfterRejoin are the operator's keys: set from a host's
	// grant until its cycle ends, and from the end of a reboot rollboot
	// finished until the next grant. An empty value removes the key.
	BeforeDrain map[string]string
	AfterRejoin map[string]string
}

var nodeMetaTable = &table{typ: "node_meta", of: reflect.TypeFor[NodeMetaConfig](), settings: []setting{
	{name: "next_in_line", field: "NextInLine", check: value(atLeast(0, "")),
		doc: "How many pending hosts of each group, in the order they will be granted (first come, first " +
			"served, then host name), get `rollboot_next = \"true\"` on their node, and every other node " +
			"`\"false\"`: a job's `affinity` can then keep the allocations a drain moves off the nodes " +
			"drained next ([deploy](deploy.md#steering-work-away-from-the-next-reboots)). `0`: no node is " +
			"marked, and the key is removed from those that have it. At least 0."},
	{name: "cordon_next", field: "CordonNext", check: value(atLeast(0, "")),
		doc: "How many hosts at the head of each group's line, waiting only for a slot (not paused, " +
			"not outside their window, not held), have their node marked ineligible before their " +
			"drain, so that the allocations the drains before them move do not land there and move " +
			"twice (Kured's `--prefer-no-schedule-taint`, as a hard rule): only while the " +
			"capacity gate (`capacity { enabled = true }`) says the nodes left can take what the " +
			"nodes out and the hosts granted now move without that node; otherwise no cordon, and " +
			"`status` says why. The node is given back (eligible) when its host leaves the line " +
			"without a drain; at its grant the cordon becomes part of the drain " +
			"([below](#cordon-the-next-nodes)). `0`: no cordon. At least 0; refused with " +
			"`capacity { enabled = false }`."},
	{name: "before_drain", field: "BeforeDrain", defDoc: "none",
		check: value(metaItems),
		doc: "Keys written on a host's node when its drain is granted, kept until its cycle ends (back " +
			"in service, released, aborted, interrupted), then removed or set to `after_rejoin`'s value: " +
			"Kured's `--pre-reboot-node-labels`. Written beside the drain, not before it: a failed " +
			"write never holds the drain (it is logged, counted and retried). An empty value removes " +
			"the key. Keys as Nomad's node metadata takes them (dotted identifiers), not " +
			"`rollboot_*`."},
	{name: "after_rejoin", field: "AfterRejoin", defDoc: "none",
		check: value(metaItems),
		doc: "Keys written on a host's node once rollboot finished a reboot of it, kept until its next " +
			"grant (where `before_drain` has the same key, its value wins meanwhile); a node rollboot " +
			"never rebooted does not get them: Kured's `--post-reboot-node-labels`. Same keys as " +
			"`before_drain`. Neither is written with `coordinator { node_meta = false }`."},
}}

// metaKey reports whether Nomad takes k as a node metadata key: dotted HCL
// identifiers (nomad/structs/node.go NodeMetaApplyRequest.Validate).
func metaKey(k string) bool {
	for part := range strings.SplitSeq(k, ".") {
		if !hclsyntax.ValidIdentifier(part) {
			return false
		}
	}
	return true
}

// metaItems checks the keys of before_drain or after_rejoin.
func metaItems(m map[string]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		switch {
		case !metaKey(k):
			errs = append(errs, fmt.Errorf("key %q is not a node metadata key: use dotted identifiers (letters, digits, _ and -, not starting with a digit)", k))
		case strings.HasPrefix(k, "rollboot_"):
			errs = append(errs, fmt.Errorf("key %q: rollboot_* keys are rollboot's own: use another name", k))
		}
	}
	return errors.Join(errs...)
}

// cordons checks node_meta.cordon_next against the capacity gate: a node is
// cordoned only while the gate says the other nodes can spare it, so without
// the gate nothing would ever be.
func (v *validator) cordons() {
	key := scope{"node_meta.cordon_next", "node_meta.cordon_next"}
	if v.c.NodeMeta.CordonNext == 0 || v.c.Capacity.Enabled || !v.written(key) || !v.good(key) {
		return
	}
	v.errorf(key, "a node is cordoned only while the capacity gate says the other nodes can spare it, and capacity.enabled is false: "+
		"enable the capacity gate, or set cordon_next = 0")
}

package nodemeta

import (
	"encoding/json"
	"maps"
)

// The operator's keys (the policy's node_meta.before_drain and after_rejoin,
// Kured's --pre-reboot-node-labels and --post-reboot-node-labels): rollboot
// owns every key they name, and writes each node's from its host's phase.

// inCycle are the phases from a host's grant to the end of its cycle: its
// node is out for rollboot (store.Plan.Active), or held so (stuck).
var inCycle = map[string]bool{"draining": true, "drained": true, "rebooting": true, "rejoining": true, "stuck": true}

// OperatorKeys returns the operator's keys wanted on a node whose host is in
// phase, rebooted by rollboot at least once (rebooted) or not: from its grant
// to the end of its cycle, before's values; otherwise, once rollboot finished
// a reboot of it, after's; every other key named by either is removed (nil),
// as is a key whose value is empty. Nil when neither names a key.
func OperatorKeys(before, after map[string]string, phase string, rebooted bool) map[string]*string {
	if len(before) == 0 && len(after) == 0 {
		return nil
	}
	out := make(map[string]*string, len(before)+len(after))
	set := func(from map[string]string) {
		for k, v := range from {
			if v == "" {
				out[k] = nil
			} else {
				out[k] = &v
			}
		}
	}
	for k := range maps.Keys(before) {
		out[k] = nil
	}
	for k := range maps.Keys(after) {
		out[k] = nil
	}
	if rebooted {
		set(after)
	}
	if inCycle[phase] {
		set(before)
	}
	return out
}

// EncodeKeys gives keys as Meta.Operator holds them: one string, the same for
// the same keys and values (JSON sorts a map's keys).
func EncodeKeys(keys map[string]*string) string {
	if len(keys) == 0 {
		return ""
	}
	b, _ := json.Marshal(keys) // a map of strings always encodes
	return string(b)
}

// decodeKeys reads what EncodeKeys wrote.
func decodeKeys(s string) map[string]*string {
	if s == "" {
		return nil
	}
	var keys map[string]*string
	_ = json.Unmarshal([]byte(s), &keys) // written by EncodeKeys
	return keys
}

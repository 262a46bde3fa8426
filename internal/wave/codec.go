package wave

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// Items encodes the state as the items of the waves variable: one JSON item
// per wave, keyed by a hash of its group and fingerprint (item keys allow
// neither's every character).
func Items(st State) map[string]string {
	out := make(map[string]string, len(st.Waves))
	for _, w := range st.Waves {
		b, _ := json.Marshal(w) // a Wave always encodes
		out[itemKey(w.Group, w.Fingerprint)] = string(b)
	}
	return out
}

func itemKey(group, fp string) string {
	sum := sha256.Sum256([]byte(group + "\x00" + fp))
	return "w" + hex.EncodeToString(sum[:8])
}

// FromItems decodes the items of the waves variable. An item that cannot be
// read is an error: the coordinator then holds every tracked group's waves
// (what it would forget could be a canary's failure).
func FromItems(items map[string]string) (State, error) {
	var st State
	keys := make([]string, 0, len(items))
	for k := range items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var w Wave
		if err := json.Unmarshal([]byte(items[k]), &w); err != nil {
			return State{}, fmt.Errorf("wave item %s: %w", k, err)
		}
		if w.Group == "" || w.Fingerprint == "" || itemKey(w.Group, w.Fingerprint) != k {
			return State{}, fmt.Errorf("wave item %s: group %q and fingerprint %q do not match its key", k, w.Group, w.Fingerprint)
		}
		st.Waves = append(st.Waves, w)
	}
	return prune(st), nil
}

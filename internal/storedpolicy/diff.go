package storedpolicy

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rollboot/rollboot/internal/config"
)

// SettingChange is one setting that differs between two policies. Old is ""
// for a setting only the new policy has (a new group or window), New is "" for
// one it no longer has.
type SettingChange struct {
	Key      string // such as `drain.deadline` or `group "batch".concurrency`
	Old, New string // the values as HCL writes them
}

// DiffSettings compares every setting of two policies, defaults included, in
// the order the new policy renders them, then the settings it no longer has.
//
// Each group also has the key `group "NAME".effective_windows`: the windows
// its drains start in, named or inherited from the file (a group that names
// none inherits every window of the file), so that the diff shows a group
// whose windows change through another's or the file's.
func DiffSettings(old, new *config.Rules) []SettingChange {
	oldKeys, oldVals := settings(old.String())
	newKeys, newVals := settings(new.String())
	oldKeys, newKeys = withEffectiveWindows(old, oldKeys, oldVals), withEffectiveWindows(new, newKeys, newVals)
	var out []SettingChange
	for _, k := range newKeys {
		if o, n := oldVals[k], newVals[k]; o != n {
			out = append(out, SettingChange{Key: k, Old: o, New: n})
		}
	}
	for _, k := range oldKeys {
		if _, ok := newVals[k]; !ok {
			out = append(out, SettingChange{Key: k, Old: oldVals[k]})
		}
	}
	return out
}

// withEffectiveWindows adds each group's effective windows to keys and vals.
func withEffectiveWindows(r *config.Rules, keys []string, vals map[string]string) []string {
	p := r.Policy()
	for _, g := range append(slices.Clone(p.Groups), p.Default) {
		k := fmt.Sprintf("group %q.effective_windows", g.Name)
		keys = append(keys, k)
		vals[k] = g.Schedule.String()
	}
	return keys
}

// settings reads a rendering of config.Rules (blocks of `name = value` lines,
// blocks nested in blocks) into keys such as `group "batch".concurrency` or
// `group "batch".drain.deadline`.
func settings(rendered string) ([]string, map[string]string) {
	var (
		keys   []string
		blocks []string // the blocks the line is in, outermost first
	)
	vals := map[string]string{}
	for _, line := range strings.Split(rendered, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasSuffix(t, "{"):
			blocks = append(blocks, strings.TrimSpace(strings.TrimSuffix(t, "{")))
		case t == "}":
			if len(blocks) > 0 {
				blocks = blocks[:len(blocks)-1]
			}
		case t == "":
		default:
			name, val, ok := strings.Cut(t, "=")
			if !ok {
				continue
			}
			k := strings.Join(append(slices.Clone(blocks), strings.TrimSpace(name)), ".")
			keys = append(keys, k)
			vals[k] = strings.TrimSpace(val)
		}
	}
	return keys, vals
}

// WriteDiff prints what the change does, for people: the stored version and
// the one it would become, each setting that changes, and each host whose
// group changes.
func WriteDiff(w io.Writer, ch *Change) {
	switch {
	case ch.Current.Version == 0 && ch.CurrentErr == nil:
		fmt.Fprintln(w, "No policy is stored (the safe default applies): this file becomes version 1.")
	case ch.CurrentErr != nil:
		fmt.Fprintf(w, "The stored policy (version %d) cannot be used: %v\nCompared with the safe default; this file becomes version %d.\n",
			ch.Current.Version, ch.CurrentErr, ch.Current.Version+1)
	default:
		fmt.Fprintf(w, "Stored policy: version %d, applied by %s at %s; this file becomes version %d.\n",
			ch.Current.Version, ch.Current.AppliedBy, ch.Current.AppliedAt.UTC().Format("2006-01-02T15:04:05Z"), ch.Current.Version+1)
	}
	if len(ch.Settings) == 0 {
		fmt.Fprintln(w, "Settings: no change.")
	} else {
		fmt.Fprintln(w, "Settings:")
		for _, s := range ch.Settings {
			switch {
			case s.Old == "":
				fmt.Fprintf(w, "  + %s = %s\n", s.Key, s.New)
			case s.New == "":
				fmt.Fprintf(w, "  - %s = %s\n", s.Key, s.Old)
			default:
				fmt.Fprintf(w, "  ~ %s: %s => %s\n", s.Key, s.Old, s.New)
			}
		}
	}
	if len(ch.Moves) == 0 {
		fmt.Fprintln(w, "Hosts: no host changes group.")
		return
	}
	fmt.Fprintln(w, "Hosts whose group changes:")
	for _, m := range ch.Moves {
		fmt.Fprintf(w, "  %s: %s => %s\n", m.Host, m.From, m.To)
	}
}

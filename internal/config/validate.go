package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/rollboot/rollboot/internal/policy"
)

// validator collects errors about c.
type validator struct {
	c    *Config
	errs Errors
}

// errorf records an error about the value at key, positioned where the value
// was written (or at the block fallback when the value was not written, for
// a missing required attribute).
func (v *validator) errorf(key scope, format string, args ...any) {
	v.errorAt(key.key, key.name, format, args...)
}

// errorAt records an error positioned at the range of the value at rangeKey.
func (v *validator) errorAt(rangeKey string, name string, format string, args ...any) {
	v.errs = append(v.errs, &Error{Range: v.c.pos[rangeKey], Msg: name + ": " + fmt.Sprintf(format, args...)})
}

// good reports whether none of the keys failed to decode.
func (v *validator) good(keys ...scope) bool {
	for _, k := range keys {
		if v.c.bad[k.key] {
			return false
		}
	}
	return true
}

// written reports whether the value at key was given in the file.
func (v *validator) written(key scope) bool {
	_, ok := v.c.pos[key.key]
	return ok
}

// sections checks every block of every section against its table.
func (v *validator) sections() {
	for _, sec := range sections {
		for _, b := range sec.blocks(v.c) {
			v.block(b.s, sec.t, b.v, false)
		}
	}
}

// block checks the settings of a block of table t at scope s, and its nested
// blocks. A value that could not be decoded is not checked: it was reported,
// and what stands in its place is not what the file says. With onlyWritten,
// only the values the file wrote are checked.
func (v *validator) block(s scope, t *table, val reflect.Value, onlyWritten bool) {
	for _, row := range t.settings {
		key := s.sub(row.name)
		if !v.good(key) || onlyWritten && !v.written(key) {
			continue
		}
		f := fieldOf(val, row.field)
		if row.required != "" && f.IsZero() && !v.written(key) {
			v.errorAt(s.key, key.name, "is required, for example %s = %s", row.name, row.required)
			continue
		}
		if row.check == nil {
			continue
		}
		if err := row.check(f.Interface(), siblings{v: v, s: s, block: val, t: t, self: row.name}); err != nil {
			v.report(key, err)
		}
	}
	for _, n := range t.nested {
		n.check(v, s, val)
	}
}

// report records what a check found wrong with the value at key: each error
// joined in err, those about an element of a list at that element.
func (v *validator) report(key scope, err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			v.report(key, e)
		}
		return
	}
	var el *elemError
	if !errors.As(err, &el) {
		v.errorf(key, "%v", err)
		return
	}
	at, name := fmt.Sprintf("%s.%d", key.key, el.i), key.name
	if _, ok := v.c.pos[at]; !ok || el.atList {
		at = key.key
	}
	if el.indexed {
		name = fmt.Sprintf("%s[%d]", name, el.i)
	}
	v.errorAt(at, name, "%v", el.err)
}

// siblings are the settings of the block holding the one a check is about.
type siblings struct {
	v     *validator
	s     scope
	block reflect.Value
	t     *table
	self  string // the name of the setting checked
}

// get returns the value of the setting attr of the block, and false when it
// could not be decoded (the value in its place is not the file's).
func (b siblings) get(attr string) (any, bool) {
	i := slices.IndexFunc(b.t.settings, func(row setting) bool { return row.name == attr })
	if i < 0 {
		panic("config: " + b.t.typ + " has no setting " + attr)
	}
	return fieldOf(b.block, b.t.settings[i].field).Interface(), b.v.good(b.s.sub(attr))
}

// name is the name of the setting attr of the block, for messages.
func (b siblings) name(attr string) string { return b.s.sub(attr).name }

// uniqueLabel checks the label (name) of the i-th block of type kind: it has
// one, its own among those seen so far (first, which it adds to).
func (v *validator) uniqueLabel(kind string, i int, label string, first map[string]int) {
	s := labelScope(kind, i, label)
	name := scope{s.key + ".name", s.name}
	j, dup := first[label]
	switch {
	case label == "":
		v.errorf(name, "a %s needs a name", kind)
	case dup:
		v.errorf(name, "duplicate %s name, first defined at %s", kind, v.posString(labelScope(kind, j, label).key))
	default:
		first[label] = i
	}
}

// windows checks the windows' names: each window has one, its own.
func (v *validator) windows() {
	first := map[string]int{}
	for i, wc := range v.c.Windows {
		v.uniqueLabel("window", i, wc.Name, first)
	}
}

func (v *validator) posString(key string) string {
	r, ok := v.c.pos[key]
	if !ok || r.Filename == "" {
		return "an earlier block"
	}
	return rangeString(r)
}

// groups checks what ties the groups together: their names, their order
// (none after a catch-all), the windows they name and the hosts they list.
func (v *validator) groups() {
	first := map[string]int{}
	catchAll := -1
	nodeless := map[string]string{} // host -> the list that has it
	for i, gc := range v.c.Groups {
		s := labelScope("group", i, gc.Name)
		name := scope{s.key + ".name", s.name}
		switch j, dup := first[gc.Name]; {
		case gc.Name == "":
			v.errorf(name, "a group needs a name")
		case gc.Name == policy.DefaultGroupName:
			v.errorf(name, `the name "default" is reserved for the nodes no group matches; to configure them, add a last group with another name and no filter`)
		case dup:
			v.errorf(name, "duplicate group name, first defined at %s", v.posString(labelScope("group", j, gc.Name).key))
		default:
			first[gc.Name] = i
		}
		if catchAll >= 0 {
			v.errorf(name, "can never match a node: group %q before it has no filter and matches every node", v.c.Groups[catchAll].Name)
		}
		if gc.Filter == "" && catchAll < 0 && v.good(s.sub("filter")) {
			catchAll = i
		}
		v.groupWindows(s.sub("windows"), gc.Windows)
		v.hostsOnce(s.sub("hosts_without_node"), gc.HostsWithoutNode, nodeless)
	}
}

// groupWindows checks that each window a group names is defined.
func (v *validator) groupWindows(key scope, names []string) {
	defined := map[string]bool{}
	for _, w := range v.c.Windows {
		defined[w.Name] = true
	}
	var errs []error
	for k, name := range names {
		switch {
		case defined[name]:
		case len(defined) == 0:
			errs = append(errs, elem(k, fmt.Errorf("unknown window %q: no window block is defined", name)))
		default:
			errs = append(errs, elem(k, fmt.Errorf("unknown window %q: defined windows are %s", name, quotedKeys(defined))))
		}
	}
	if len(errs) > 0 && v.good(key) {
		v.report(key, errors.Join(errs...))
	}
}

func quotedKeys(m map[string]bool) string {
	var names []string
	for n := range m {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// hostsOnce checks that no host of a group's hosts_without_node is listed
// before, in it or in an earlier group's (seen: host -> the list's name).
func (v *validator) hostsOnce(key scope, hosts []string, seen map[string]string) {
	var errs []error
	for k, h := range hosts {
		if checkStorableHost(h) != nil {
			continue // reported by the setting's check
		}
		if first, dup := seen[h]; dup {
			errs = append(errs, elem(k, fmt.Errorf("host %q is already listed in %s: a host belongs to one group", h, first)))
			continue
		}
		seen[h] = key.name
	}
	if len(errs) > 0 && v.good(key) {
		v.report(key, errors.Join(errs...))
	}
}

package config

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
)

// The settings tables. Each kind of block has one table, each row of it is one
// setting: its name in the file, the field of the block's struct that holds it,
// its default, its check and its documentation. The defaults (Default), the
// decoder, the environment (ApplyEnv), the validator (Compile), the renderings
// (String, Rules.String), Compiled.With and the settings tables of
// docs/configuration.md (docs_test.go) all read these tables: a setting is
// written once, in its block's struct and in its row.

// setting is one attribute of a block: a row of its block's table.
type setting struct {
	name  string // in the file
	field string // the field of the block's struct that holds the value
	def   any    // the default, of the field's type; nil: the zero value
	check check  // what a value must be; nil: any value of the field's type
	doc   string // its meaning and checks, as docs/configuration.md shows them

	argv     bool                // a []string that is a program and its arguments (the docs' type "argv")
	required string              // no default: the file must set it (an example value, for the message)
	defDoc   string              // the default as the docs say it, where its rendering would say less
	env      string              // the variable that fills it when the file does not (ApplyEnv)
	policy   bool                // a rollout rule in a local block (the coordinator's)
	shown    func(string) string // how a string is rendered: a URL with its password masked
}

// table is one kind of block: its settings, then the blocks it may hold.
type table struct {
	typ      string       // the block type, as written in the file
	of       reflect.Type // the struct a block decodes into
	label    string       // a labelled block's field holding its label ("Name")
	labelDoc string       // the docs' row of the label
	settings []setting
	nested   []nested
}

// section is a top-level block of the files.
type section struct {
	t      *table
	field  string // the Config field: one struct, or a slice of them for a labelled block
	policy bool   // a block of the stored policy; else of the local file
}

// sections are the top-level blocks, in the order they are decoded and
// rendered: the policy's drain and healthy blocks before the groups, whose
// defaults they are.
var sections = []section{
	{t: nomadTable, field: "Nomad"},
	{t: stateTable, field: "State"},
	{t: agentTable, field: "Agent"},
	{t: coordinatorTable, field: "Coordinator"},
	{t: fleetlockTable, field: "FleetLock"},
	{t: telemetryTable, field: "Telemetry"},
	{t: notifyTable, field: "Notify"},
	{t: drainTable, field: "Drain", policy: true},
	{t: alertsTable, field: "Alerts", policy: true},
	{t: workloadsTable, field: "Workloads", policy: true},
	{t: capacityTable, field: "Capacity", policy: true},
	{t: healthyTable, field: "Healthy", policy: true},
	{t: silenceTable, field: "Silence", policy: true},
	{t: nodeMetaTable, field: "NodeMeta", policy: true},
	{t: approvalTable, field: "Approval", policy: true},
	{t: failureBudgetTable, field: "FailureBudget", policy: true},
	{t: rolloutTable, field: "Rollout", policy: true},
	{t: groupTable, field: "Groups", policy: true},
	{t: windowTable, field: "Windows", policy: true},
	{t: freezeTable, field: "Freezes", policy: true},
	{t: gateTable, field: "Gates", policy: true},
}

// sectionOf returns the section of the top-level blocks of type typ, one of
// sections' (the files' schema admits no other).
func sectionOf(typ string) section {
	return sections[slices.IndexFunc(sections, func(sec section) bool { return sec.t.typ == typ })]
}

// instance is a block of a section in a configuration.
type instance struct {
	s      scope
	v      reflect.Value // its struct
	labels []string
}

// blocks returns the blocks of the section in c: its one block, or each of its
// labelled ones.
func (sec section) blocks(c *Config) []instance {
	f := fieldOf(reflect.ValueOf(c).Elem(), sec.field)
	if sec.t.label == "" {
		return []instance{{s: scope{sec.t.typ, sec.t.typ}, v: f}}
	}
	out := make([]instance, f.Len())
	for i := range out {
		label := fieldOf(f.Index(i), sec.t.label).String()
		out[i] = instance{s: labelScope(sec.t.typ, i, label), v: f.Index(i), labels: []string{label}}
	}
	return out
}

// isPolicy reports whether row belongs in the stored policy.
func (sec section) isPolicy(row setting) bool { return sec.policy || row.policy }

// mixed reports whether the block holds both local settings and policy ones:
// each of its settings is then checked for its place, not the block.
func (t *table) mixed() bool {
	return slices.ContainsFunc(t.settings, func(row setting) bool { return row.policy })
}

// schema is what a block of the table may hold.
func (t *table) schema() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, row := range t.settings {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: row.name})
	}
	for _, n := range t.nested {
		s.Blocks = append(s.Blocks, n.header())
	}
	return s
}

// header is the table's block header among its parent's blocks.
func (t *table) header() hcl.BlockHeaderSchema {
	h := hcl.BlockHeaderSchema{Type: t.typ}
	if t.label != "" {
		h.LabelNames = []string{"name"}
	}
	return h
}

// fieldOf returns the field of block value v (a struct) holding the setting.
func fieldOf(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("config: %s has no field %s", v.Type(), name))
	}
	return f
}

// fill sets the defaults of the table's settings and nested blocks in v, a
// struct of the table's type. c is the configuration a nested block inherits
// its values from (nil: none, the table's defaults).
func (t *table) fill(v reflect.Value, c *Config) {
	for _, row := range t.settings {
		f := fieldOf(v, row.field)
		if row.def == nil {
			f.SetZero()
			continue
		}
		def := reflect.ValueOf(row.def)
		if def.Type() != f.Type() {
			panic(fmt.Sprintf("config: the default of %s.%s is a %s, not a %s", t.typ, row.name, def.Type(), f.Type()))
		}
		if def.Kind() == reflect.Slice { // each configuration its own copy
			def = reflect.AppendSlice(reflect.MakeSlice(def.Type(), 0, def.Len()), def)
		}
		f.Set(def)
	}
	for _, n := range t.nested {
		n.fill(v, c)
	}
}

// kind is what the decoder and the renderer know of a field's type.
type kind struct {
	doc  string   // the docs' type column
	ty   cty.Type // what a value converts to
	want string   // what a value must be, in messages
	// set stores a value converted to ty in dst; its error follows the
	// setting's name in the message.
	set func(v cty.Value, dst reflect.Value) error
	// get is the value of src to render.
	get func(src reflect.Value) cty.Value
}

// kinds are the types settings may have, by the field's type.
var kinds = map[reflect.Type]kind{
	reflect.TypeFor[string](): {doc: "string", ty: cty.String, want: "a string", set: setString,
		get: func(src reflect.Value) cty.Value { return cty.StringVal(src.String()) }},
	reflect.TypeFor[Secret](): {doc: "string", ty: cty.String, want: "a string", set: setString,
		get: func(src reflect.Value) cty.Value { return cty.StringVal(src.Interface().(Secret).String()) }},
	reflect.TypeFor[bool](): {doc: "bool", ty: cty.Bool, want: "true or false",
		set: func(v cty.Value, dst reflect.Value) error { dst.SetBool(v.True()); return nil },
		get: func(src reflect.Value) cty.Value { return cty.BoolVal(src.Bool()) }},
	reflect.TypeFor[int](): {doc: "number", ty: cty.Number, want: "a whole number", set: setInt,
		get: func(src reflect.Value) cty.Value { return cty.NumberIntVal(src.Int()) }},
	reflect.TypeFor[time.Duration](): {doc: "duration", ty: cty.String, want: `a duration string such as "30s", "5m" or "1h30m"`,
		set: setDuration, get: func(src reflect.Value) cty.Value { return durationVal(time.Duration(src.Int())) }},
	reflect.TypeFor[[]string](): {doc: "list of strings", ty: cty.List(cty.String), want: "a list of strings",
		set: setList, get: func(src reflect.Value) cty.Value { return strList(src.Interface().([]string)) }},
	reflect.TypeFor[[]Secret](): {doc: "list of strings", ty: cty.List(cty.String), want: "a list of strings",
		set: setList, get: func(src reflect.Value) cty.Value { return secretList(src.Interface().([]Secret)) }},
	reflect.TypeFor[map[string]string](): {doc: "map of strings", ty: cty.Map(cty.String), want: `a map of strings such as { maintenance = "true" }`,
		set: setMap, get: func(src reflect.Value) cty.Value { return strMap(src.Interface().(map[string]string)) }},
	reflect.TypeFor[[][]string](): {doc: "list of argv", ty: cty.List(cty.List(cty.String)),
		want: `a list of argv lists such as [["/usr/local/bin/notify", "rebooting"]]`,
		set:  setList, get: func(src reflect.Value) cty.Value { return argvList(src.Interface().([][]string)) }},
}

// kindOf returns the kind of a field.
func kindOf(f reflect.Value) kind {
	k, ok := kinds[f.Type()]
	if !ok {
		panic(fmt.Sprintf("config: no setting can be a %s", f.Type()))
	}
	return k
}

func setString(v cty.Value, dst reflect.Value) error {
	dst.SetString(v.AsString())
	return nil
}

func setInt(v cty.Value, dst reflect.Value) error {
	var n int
	if err := gocty.FromCtyValue(v, &n); err != nil {
		return fmt.Errorf("must be a whole number, got %s", v.AsBigFloat().Text('g', -1))
	}
	dst.SetInt(int64(n))
	return nil
}

func setDuration(v cty.Value, dst reflect.Value) error {
	d, err := time.ParseDuration(v.AsString())
	if err != nil {
		return fmt.Errorf(`invalid duration %q: use a number with a unit (ns, us, ms, s, m, h) such as "30s", "5m" or "1h30m"`, v.AsString())
	}
	dst.SetInt(int64(d))
	return nil
}

// setList stores a list, of strings or of lists of strings: an empty list is
// nil, an empty argv in a list is not.
func setList(v cty.Value, dst reflect.Value) error {
	out := reflect.Zero(dst.Type())
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		elem := reflect.New(dst.Type().Elem()).Elem()
		if ev.Type().IsListType() {
			_ = setList(ev, elem)
			if elem.IsNil() {
				elem.Set(reflect.MakeSlice(elem.Type(), 0, 0))
			}
		} else {
			elem.SetString(ev.AsString())
		}
		out = reflect.Append(out, elem)
	}
	dst.Set(out)
	return nil
}

// setMap stores a map of strings: an empty map is nil.
func setMap(v cty.Value, dst reflect.Value) error {
	var out map[string]string
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		if out == nil {
			out = map[string]string{}
		}
		out[k.AsString()] = ev.AsString()
	}
	dst.Set(reflect.ValueOf(out))
	return nil
}

// strMap is a map of strings as a value to render.
func strMap(m map[string]string) cty.Value {
	if len(m) == 0 {
		return cty.MapValEmpty(cty.String)
	}
	vals := make(map[string]cty.Value, len(m))
	for k, v := range m {
		vals[k] = cty.StringVal(v)
	}
	return cty.MapVal(vals)
}

// nested is a kind of block inside another: agent's reboot, a group's drain
// and healthy blocks, notify's messages.
type nested interface {
	header() hcl.BlockHeaderSchema
	// fill sets the defaults of the nested blocks in outer, the outer block's
	// struct; c is the configuration they may inherit from (nil: none).
	fill(outer reflect.Value, c *Config)
	decode(d *decoder, blocks hcl.Blocks, s scope, outer reflect.Value)
	check(v *validator, s scope, outer reflect.Value)
	render(body *hclwrite.Body, outer reflect.Value)
	// docRow is the row of the outer block's docs table: name, default and
	// meaning; nil for a block that has a table of its own.
	docRow() []string
}

// child is a nested block with a table of its own, decoded into a field of
// the outer block's struct.
type child struct {
	t     *table
	field string
	// inherit is the value of the block before the file sets any of it (a
	// group's drain block: the top-level drain block's values); nil: its
	// table's defaults. Only what the file sets in such a block is checked
	// there: the rest was checked where it came from.
	inherit func(c *Config) any
	// doc and defDoc make the block a row of the outer block's docs table
	// (meaning, and the default as the docs say it); "": a table of its own.
	doc, defDoc string
	// renderIf, when set, is the field of the block that must be set for the
	// block to be rendered (a gate's check: only the one it has).
	renderIf string
}

func (ch child) header() hcl.BlockHeaderSchema { return ch.t.header() }

func (ch child) fill(outer reflect.Value, c *Config) {
	f := fieldOf(outer, ch.field)
	if ch.inherit != nil && c != nil {
		f.Set(reflect.ValueOf(ch.inherit(c)))
		return
	}
	ch.t.fill(f, c)
}

func (ch child) decode(d *decoder, blocks hcl.Blocks, s scope, outer reflect.Value) {
	if b := d.single(blocks, ch.t.typ); b != nil {
		d.block(b.Body, s.sub(ch.t.typ), ch.t, fieldOf(outer, ch.field))
	}
}

func (ch child) check(v *validator, s scope, outer reflect.Value) {
	v.block(s.sub(ch.t.typ), ch.t, fieldOf(outer, ch.field), ch.inherit != nil)
}

func (ch child) render(body *hclwrite.Body, outer reflect.Value) {
	if ch.renderIf != "" && fieldOf(fieldOf(outer, ch.field), ch.renderIf).IsZero() {
		return
	}
	renderBlock(body, ch.t, fieldOf(outer, ch.field), nil, all)
}

func (ch child) docRow() []string {
	if ch.doc == "" {
		return nil
	}
	return []string{"`" + ch.t.typ + " { ... }`", ch.defDoc, ch.doc}
}

// only returns a table of the settings names of t, for blocks of type of
// that have the same fields (a group's drain block: some of the top-level
// drain block's settings).
func (t *table) only(of reflect.Type, names ...string) *table {
	out := &table{typ: t.typ, of: of}
	for _, row := range t.settings {
		if slices.Contains(names, row.name) {
			out.settings = append(out.settings, row)
		}
	}
	return out
}

package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Load reads the HCL file at path (HCL JSON if the name ends in ".json")
// over the defaults and compiles it, without the environment: every problem
// is returned at once as Errors, and then no Compiled.
//
// A daemon takes the environment and its flags into account: it calls Parse,
// then ApplyEnv, then applies its flags, then Compile.
func Load(path string) (*Compiled, error) {
	c, err := Parse(path)
	if err != nil {
		return nil, err
	}
	return Compile(c)
}

// LoadBytes is Load for a file already read; filename is used in positions
// and to choose between HCL and HCL JSON.
func LoadBytes(src []byte, filename string) (*Compiled, error) {
	c, err := ParseBytes(src, filename)
	if err != nil {
		return nil, err
	}
	return Compile(c)
}

// Parse reads the HCL file at path (HCL JSON if the name ends in ".json")
// over the defaults, without checking it. It fails only when the file cannot
// be read or is not HCL; a value that cannot be decoded (a list where a
// string belongs, a malformed duration) is kept aside and reported by
// Compile with the other problems, so that every problem is reported at once.
func Parse(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseBytes(src, path)
}

// ParseBytes is Parse for a file already read; filename is used in positions
// and to choose between HCL and HCL JSON.
//
// A local file holds only host-local settings: a policy setting in it (a
// group, window or drain block, or a rollout rule of the coordinator block) is
// reported, where it is written, as belonging in the stored policy.
func ParseBytes(src []byte, filename string) (*Config, error) {
	file, err := parseHCL(src, filename)
	if err != nil {
		return nil, err
	}
	return decodeFile(file, localFile), nil
}

// decodeFile decodes a parsed file of the given kind over the defaults.
func decodeFile(file *hcl.File, kind fileKind) *Config {
	c := Default()
	c.bad = map[string]bool{}
	d := &decoder{c: c, kind: kind}
	d.root(file.Body)
	c.problems = d.errs
	return c
}

// parseHCL parses src as HCL (HCL JSON if filename ends in ".json").
func parseHCL(src []byte, filename string) (*hcl.File, error) {
	parser := hclparse.NewParser()
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if strings.HasSuffix(filename, ".json") {
		file, diags = parser.ParseJSON(src, filename)
	} else {
		file, diags = parser.ParseHCL(src, filename)
	}
	if diags.HasErrors() {
		return nil, fromDiags(diags).orNil()
	}
	return file, nil
}

// decoder decodes the body of a file into c, recording positions and
// collecting errors.
type decoder struct {
	c    *Config
	kind fileKind
	errs Errors
}

// scope names a block: key for positions, name for messages.
type scope struct{ key, name string }

func (s scope) sub(attr string) scope { return scope{s.key + "." + attr, s.name + "." + attr} }

func (d *decoder) errorf(rng hcl.Range, format string, args ...any) {
	d.errs = append(d.errs, &Error{Range: rng, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	content, diags := body.Content(schema)
	d.errs = append(d.errs, fromDiags(diags)...)
	return content
}

// single returns the only block of type typ, reporting any further ones.
func (d *decoder) single(blocks hcl.Blocks, typ string) *hcl.Block {
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		if first != nil {
			d.errorf(b.DefRange, "duplicate %s block: only one is allowed, the first is at %s", typ, rangeString(first.DefRange))
			continue
		}
		first = b
	}
	return first
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// root decodes the top-level blocks: each block of one instance in the order
// of sections, then the labelled ones (groups, windows) in file order.
func (d *decoder) root(body hcl.Body) {
	schema := &hcl.BodySchema{}
	for _, sec := range sections {
		schema.Blocks = append(schema.Blocks, sec.t.header())
	}
	content := d.content(body, schema)
	if content == nil {
		return
	}
	// A block that belongs in the other kind of file is reported, not decoded.
	var blocks hcl.Blocks
	for _, b := range content.Blocks {
		if d.checkBlock(b) {
			blocks = append(blocks, b)
		}
	}
	c := reflect.ValueOf(d.c).Elem()
	for _, sec := range sections {
		if sec.t.label != "" {
			continue
		}
		if b := d.single(blocks, sec.t.typ); b != nil {
			d.block(b.Body, scope{sec.t.typ, sec.t.typ}, sec.t, fieldOf(c, sec.field))
		}
	}
	for _, b := range blocks {
		if sec := sectionOf(b.Type); sec.t.label != "" {
			d.labelled(b, sec, fieldOf(c, sec.field))
		}
	}
}

// labelled decodes a labelled block (a group, a window) and appends it to
// list: its label, then the table's defaults and what the block sets.
func (d *decoder) labelled(b *hcl.Block, sec section, list reflect.Value) {
	t := sec.t
	s := labelScope(t.typ, list.Len(), b.Labels[0])
	v := reflect.New(t.of).Elem()
	t.fill(v, d.c)
	fieldOf(v, t.label).SetString(b.Labels[0])
	d.c.setPos(s.key, b.DefRange)
	d.c.setPos(s.key+".name", b.LabelRanges[0])
	d.block(b.Body, s, t, v)
	list.Set(reflect.Append(list, v))
}

// labelScope is the scope of the i-th labelled block of type typ: "group.0",
// `group "batch"`.
func labelScope(typ string, i int, label string) scope {
	return scope{fmt.Sprintf("%s.%d", typ, i), fmt.Sprintf("%s %q", typ, label)}
}

// block decodes the body of a block of table t at scope s into v, the block's
// struct: each setting written, then the nested blocks.
func (d *decoder) block(body hcl.Body, s scope, t *table, v reflect.Value) {
	content := d.content(body, t.schema())
	if content == nil {
		return
	}
	mixed := t.mixed()
	for _, row := range t.settings {
		at, ok := content.Attributes[row.name]
		if !ok || mixed && !d.checkAttr(at, s.sub(row.name).name, row.policy) {
			continue // not written, or reported as in the wrong file
		}
		d.setting(at, s.sub(row.name), fieldOf(v, row.field))
	}
	for _, n := range t.nested {
		n.decode(d, content.Blocks, s, v)
	}
}

// setting decodes the value of attribute at into dst, the field of the
// setting key: converted to the field's kind, with the position of the value
// and of each element of a list kept to point at them. A value that cannot be
// decoded is reported and marked bad, and leaves dst as it was.
func (d *decoder) setting(at *hcl.Attribute, key scope, dst reflect.Value) {
	k := kindOf(dst)
	v, ok := d.value(at, key, k.ty, k.want)
	if !ok {
		return
	}
	d.c.setPos(key.key, at.Expr.Range())
	if err := k.set(v, dst); err != nil {
		d.errorf(at.Expr.Range(), "%s: %v", key.name, err)
		d.c.bad[key.key] = true
		return
	}
	if !k.ty.IsListType() {
		return
	}
	if elems, diags := hcl.ExprList(at.Expr); !diags.HasErrors() && len(elems) == dst.Len() {
		for i, e := range elems {
			d.c.setPos(fmt.Sprintf("%s.%d", key.key, i), e.Range())
		}
	}
}

// value evaluates the attribute, with no variables or functions, and
// converts it to ty. It reports problems without ever quoting the value, so
// that secrets stay out of messages.
func (d *decoder) value(at *hcl.Attribute, key scope, ty cty.Type, want string) (cty.Value, bool) {
	v, diags := at.Expr.Value(nil)
	if diags.HasErrors() {
		d.errs = append(d.errs, fromDiags(diags)...)
		d.c.bad[key.key] = true
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	var problem string
	switch {
	case v.IsNull():
		problem = ", not null"
	case err != nil || !cv.IsWhollyKnown():
	case ty.IsListType() && hasNull(cv):
		problem = ", with no null element"
	default:
		return cv, true
	}
	d.errorf(at.Expr.Range(), "%s: must be %s%s", key.name, want, problem)
	d.c.bad[key.key] = true
	return cty.NilVal, false
}

// hasNull reports whether a list, or a list in it, has a null element.
func hasNull(v cty.Value) bool {
	for it := v.ElementIterator(); it.Next(); {
		if _, ev := it.Element(); ev.IsNull() || ev.Type().IsListType() && hasNull(ev) {
			return true
		}
	}
	return false
}

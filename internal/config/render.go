package config

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// String renders the local configuration in HCL, the token masked. It shows
// every local setting, defaults included, and none of the policy's (Rules.String).
func (c *Config) String() string { return c.render(false) }

// policyString renders the policy settings in HCL, defaults included.
func (c *Config) policyString() string { return c.render(true) }

// render renders every setting of the policy (policy) or of the local file,
// block by block in the order of sections, each setting in the order of its
// table.
func (c *Config) render(policy bool) string {
	f := hclwrite.NewEmptyFile()
	root := f.Body()
	for _, sec := range sections {
		keep := func(row setting) bool { return sec.isPolicy(row) == policy }
		if !slices.ContainsFunc(sec.t.settings, keep) {
			continue
		}
		for _, b := range sec.blocks(c) {
			if len(root.Blocks()) > 0 {
				root.AppendNewline()
			}
			renderBlock(root, sec.t, b.v, b.labels, keep)
		}
	}
	return string(f.Bytes())
}

// all keeps every setting of a block.
func all(setting) bool { return true }

// renderBlock appends a block of table t holding v, with the settings keep
// selects, then its nested blocks.
func renderBlock(parent *hclwrite.Body, t *table, v reflect.Value, labels []string, keep func(setting) bool) {
	b := parent.AppendNewBlock(t.typ, labels).Body()
	for _, row := range t.settings {
		if keep(row) {
			b.SetAttributeValue(row.name, row.rendered(fieldOf(v, row.field)))
		}
	}
	for _, n := range t.nested {
		n.render(b, v)
	}
}

// rendered is the value of the setting's field f as it is shown.
func (row setting) rendered(f reflect.Value) cty.Value {
	if row.shown != nil {
		return cty.StringVal(row.shown(f.String()))
	}
	return kindOf(f).get(f)
}

func strList(s []string) cty.Value {
	if len(s) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(s))
	for i, x := range s {
		vals[i] = cty.StringVal(x)
	}
	return cty.ListVal(vals)
}

// secretList is a list of secrets, each masked.
func secretList(s []Secret) cty.Value {
	masked := make([]string, len(s))
	for i, x := range s {
		masked[i] = x.String()
	}
	return strList(masked)
}

func argvList(l [][]string) cty.Value {
	if len(l) == 0 {
		return cty.ListValEmpty(cty.List(cty.String))
	}
	vals := make([]cty.Value, len(l))
	for i, argv := range l {
		if len(argv) == 0 {
			vals[i] = cty.ListValEmpty(cty.String)
		} else {
			vals[i] = strList(argv)
		}
	}
	return cty.ListVal(vals)
}

// durationVal formats a duration the short way: "1h", "5m", "1h30m".
func durationVal(d time.Duration) cty.Value {
	return cty.StringVal(FormatDuration(d))
}

// FormatDuration formats d like time.Duration.String without the zero
// units at the end: "1h" rather than "1h0m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

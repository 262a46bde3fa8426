package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	shipped "github.com/rollboot/rollboot/deploy/acl"
)

// ShippedPolicyNames are the ACL policies rollboot ships (deploy/acl).
func ShippedPolicyNames() []string { return shipped.Names() }

// ruleLines returns an ACL policy's rules as one line per setting, each with
// the blocks around it ("namespace \"default\" variables path \"rollboot/*\"
// capabilities = [list read]"), sorted: two policies grant the same when their
// lines are equal, whatever their layout, comments and the order of their
// blocks and capabilities. rename rewrites block labels (the shipped files'
// namespace and prefix to the configured ones).
func ruleLines(src []byte, file string, rename func(block, label string) string) ([]string, error) {
	f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parse %s: %s", file, diags.Error())
	}
	var out []string
	if err := bodyLines(f.Body.(*hclsyntax.Body), "", rename, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func bodyLines(b *hclsyntax.Body, at string, rename func(block, label string) string, out *[]string) error {
	for name, a := range b.Attributes {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return fmt.Errorf("%s: %s", a.SrcRange, diags.Error())
		}
		*out = append(*out, at+name+" = "+valueText(v))
	}
	for _, blk := range b.Blocks {
		head := at + blk.Type
		for _, l := range blk.Labels {
			if rename != nil {
				l = rename(blk.Type, l)
			}
			head += fmt.Sprintf(" %q", l)
		}
		if err := bodyLines(blk.Body, head+" ", rename, out); err != nil {
			return err
		}
	}
	return nil
}

// valueText writes a string or a list of strings, the list sorted.
func valueText(v cty.Value) string {
	if v.IsNull() || !v.IsKnown() {
		return "null"
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		var items []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			items = append(items, valueText(e))
		}
		slices.Sort(items)
		return "[" + strings.Join(items, ", ") + "]"
	case t == cty.Bool:
		return fmt.Sprint(v.True())
	}
	return t.FriendlyName()
}

// shippedRename rewrites the shipped files, written for the state prefix
// "rollboot" in namespace "default", for the configured ones.
func shippedRename(namespace, prefix string) func(block, label string) string {
	if namespace == "" {
		namespace = "default"
	}
	return func(block, label string) string {
		switch block {
		case "namespace":
			if label == "default" {
				return namespace
			}
		case "path":
			if rest, ok := strings.CutPrefix(label, "rollboot"); ok && (rest == "" || rest[0] == '/') {
				return prefix + rest
			}
		}
		return label
	}
}

// ruleDiff compares a policy's rules in the cluster with the shipped ones:
// the lines only the shipped file has, and those only the cluster's has.
func ruleDiff(cluster, ship []string) (missing, extra []string) {
	for _, l := range ship {
		if _, found := slices.BinarySearch(cluster, l); !found {
			missing = append(missing, l)
		}
	}
	for _, l := range cluster {
		if _, found := slices.BinarySearch(ship, l); !found {
			extra = append(extra, l)
		}
	}
	return missing, extra
}

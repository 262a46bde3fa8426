package deploytest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// shippedVariables returns the variable blocks of every job file in
// deploy/nomad and of the pack, by "file: name".
func shippedVariables(t *testing.T) map[string]*hclsyntax.Body {
	t.Helper()
	files, err := filepath.Glob(deployPath("nomad", "*.nomad.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no job files in deploy/nomad: %v", err)
	}
	files = append(files, packPath("variables.hcl"))
	out := map[string]*hclsyntax.Body{}
	for _, path := range files {
		f, diags := hclsyntax.ParseConfig(read(t, path), path, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", path, diags)
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "variable" && len(b.Labels) == 1 {
				out[filepath.Base(path)+": "+b.Labels[0]] = b.Body
			}
		}
	}
	return out
}

// No shipped default points to a place that may not exist: nobody publishes
// rollboot's releases or images for the operator, so where the release or
// image comes from is always the operator's input. A default that is a URL
// would send every client's download to a location the project does not
// serve (the job's artifact would 404).
func TestNoShippedDefaultLocation(t *testing.T) {
	vars := shippedVariables(t)
	seen := map[string]bool{}
	for key, body := range vars {
		name := key[strings.Index(key, ": ")+2:]
		seen[name] = true
		a, ok := body.Attributes["default"]
		if !ok {
			continue
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", key, diags)
		}
		for _, s := range ctyStrings(v) {
			if strings.Contains(s, "://") {
				t.Errorf("%s: default %q is a location: make it the operator's input", key, s)
			}
			if s != "" && (name == "release_url" || name == "image" || name == "version") {
				t.Errorf("%s: default %q: the release, its location and the image are the operator's to name", key, s)
			}
		}
	}
	for _, want := range []string{"release_url", "image", "version"} {
		if !seen[want] {
			t.Errorf("no shipped file has a variable %q", want)
		}
	}
	// The description says what to host there and where the docs are.
	for key, body := range vars {
		if !strings.HasSuffix(key, ": release_url") {
			continue
		}
		d, _ := body.Attributes["description"].Expr.Value(nil)
		for _, want := range []string{"scripts/release", "SHA256SUMS", "docs/install.md"} {
			if !strings.Contains(d.AsString(), want) {
				t.Errorf("%s: description %q does not name %s", key, d.AsString(), want)
			}
		}
	}
}

// ctyStrings is every string in v, however nested.
func ctyStrings(v cty.Value) []string {
	switch {
	case v.IsNull():
		return nil
	case v.Type() == cty.String:
		return []string{v.AsString()}
	case v.CanIterateElements():
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, ctyStrings(e)...)
		}
		return out
	}
	return nil
}

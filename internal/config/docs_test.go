package config

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

var update = flag.Bool("update", false, "rewrite the settings tables of docs/configuration.md from the tables in code")

const configurationDoc = "../../docs/configuration.md"

// docTable is a settings table of docs/configuration.md: the settings of t
// that keep selects, with their defaults in def (a struct of t's type).
type docTable struct {
	marker string // the name in the comment before the table: <!-- settings: agent -->
	t      *table
	keep   func(setting) bool
	def    reflect.Value
}

// docTables are the settings tables of docs/configuration.md, one a block
// (nested blocks documented as a row of their block's table excepted), and two
// for a block of both kinds: "coordinator" and "coordinator policy".
func docTables() []docTable {
	var out []docTable
	var add func(marker string, t *table, def reflect.Value, keep func(setting) bool)
	add = func(marker string, t *table, def reflect.Value, keep func(setting) bool) {
		out = append(out, docTable{marker: marker, t: t, keep: keep, def: def})
		for _, n := range t.nested {
			if ch, ok := n.(child); ok && ch.docRow() == nil {
				add(marker+"."+ch.t.typ, ch.t, fieldOf(def, ch.field), all)
			}
		}
	}
	defaults := reflect.ValueOf(Default()).Elem()
	for _, sec := range sections {
		def := reflect.New(sec.t.of).Elem()
		sec.t.fill(def, nil)
		if sec.t.label == "" {
			def = fieldOf(defaults, sec.field)
		}
		if !sec.t.mixed() {
			add(sec.t.typ, sec.t, def, all)
			continue
		}
		add(sec.t.typ, sec.t, def, func(row setting) bool { return !row.policy })
		add(sec.t.typ+" policy", sec.t, def, func(row setting) bool { return row.policy })
	}
	return out
}

// markdown renders the table.
func (d docTable) markdown() string {
	env := slices.ContainsFunc(d.t.settings, func(row setting) bool { return row.env != "" })
	var b strings.Builder
	line := func(cells ...string) { fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | ")) }
	if env {
		line("name", "type", "default", "env", "meaning and validation")
		b.WriteString("|---|---|---|---|---|\n")
	} else {
		line("name", "type", "default", "meaning and validation")
		b.WriteString("|---|---|---|---|\n")
	}
	if d.t.label != "" {
		line("*label*", "string", "—", d.t.labelDoc)
	}
	for _, row := range d.t.settings {
		if !d.keep(row) {
			continue
		}
		cells := []string{"`" + row.name + "`", docType(row, d.def), docDefault(row, d.def)}
		if env {
			cells = append(cells, "`"+row.env+"`")
		}
		line(append(cells, row.doc)...)
	}
	for _, n := range d.t.nested {
		if r := n.docRow(); r != nil {
			line(r[0], "block", r[1], r[2])
		}
	}
	return b.String()
}

func docType(row setting, def reflect.Value) string {
	if row.argv {
		return "argv"
	}
	return kindOf(fieldOf(def, row.field)).doc
}

func docDefault(row setting, def reflect.Value) string {
	switch {
	case row.defDoc != "":
		return row.defDoc
	case row.required != "":
		return "required"
	}
	return "`" + string(hclwrite.TokensForValue(row.rendered(fieldOf(def, row.field))).Bytes()) + "`"
}

// withTables returns doc with the table after each marker replaced by the
// one in code, and the markers doc lacks.
func withTables(doc string, tables []docTable) (string, []string) {
	lines := strings.Split(doc, "\n")
	var missing []string
	for _, d := range tables {
		i := slices.Index(lines, "<!-- settings: "+d.marker+" -->")
		if i < 0 {
			missing = append(missing, d.marker)
			continue
		}
		end := i + 1
		for end < len(lines) && strings.HasPrefix(lines[end], "|") {
			end++
		}
		lines = slices.Replace(lines, i+1, end, strings.Split(strings.TrimSuffix(d.markdown(), "\n"), "\n")...)
	}
	return strings.Join(lines, "\n"), missing
}

// The settings tables of docs/configuration.md are the tables in code: a
// setting is documented where it is defined. `go test ./internal/config -run
// TestDocsSettingsTables -update` writes them.
func TestDocsSettingsTables(t *testing.T) {
	src, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	want, missing := withTables(doc, docTables())
	if len(missing) > 0 {
		t.Fatalf("docs/configuration.md has no table for %q: put a line <!-- settings: NAME --> before each", missing)
	}
	if *update {
		if want != doc {
			if err := os.WriteFile(configurationDoc, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if want == doc {
		return
	}
	got, wantLines := strings.Split(doc, "\n"), strings.Split(want, "\n")
	for i := range min(len(got), len(wantLines)) {
		if got[i] != wantLines[i] {
			t.Fatalf("docs/configuration.md:%d differs from the settings tables in code:\n have: %s\n want: %s\n"+
				"Edit the table in code (internal/config), then run: go test ./internal/config -run TestDocsSettingsTables -update", i+1, got[i], wantLines[i])
		}
	}
	t.Fatalf("docs/configuration.md differs from the settings tables in code in its length; run: go test ./internal/config -run TestDocsSettingsTables -update")
}

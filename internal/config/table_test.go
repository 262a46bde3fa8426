package config

import (
	"reflect"
	"testing"
)

// defaultAlerts and defaultWorkloads are the defaults of those blocks.
func defaultAlerts() AlertsConfig       { return Default().Alerts }
func defaultWorkloads() WorkloadsConfig { return Default().Workloads }

// tables returns every table, nested ones included, once.
func tables() []*table {
	var out []*table
	seen := map[*table]bool{}
	var walk func(t *table)
	walk = func(t *table) {
		if seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
		for _, n := range t.nested {
			if ch, ok := n.(child); ok {
				walk(ch.t)
			}
		}
	}
	for _, sec := range sections {
		walk(sec.t)
	}
	return out
}

// Every row of every table names a field of its block's struct, of a type a
// setting may have, with a default of that type; every field of the struct is
// a setting, a nested block or the label; no name is used twice.
func TestTables(t *testing.T) {
	for _, tb := range tables() {
		t.Run(tb.typ, func(t *testing.T) {
			used := map[string]bool{tb.label: tb.label != ""}
			names := map[string]bool{}
			for _, row := range tb.settings {
				f, ok := tb.of.FieldByName(row.field)
				if !ok {
					t.Errorf("%s: %s has no field %s", row.name, tb.of, row.field)
					continue
				}
				if _, ok := kinds[f.Type]; !ok {
					t.Errorf("%s: no setting can be a %s", row.name, f.Type)
				}
				if row.def != nil && reflect.TypeOf(row.def) != f.Type {
					t.Errorf("%s: default of type %T for a %s", row.name, row.def, f.Type)
				}
				if row.doc == "" {
					t.Errorf("%s: no doc", row.name)
				}
				if names[row.name] || used[row.field] {
					t.Errorf("%s: name or field %s used twice", row.name, row.field)
				}
				names[row.name], used[row.field] = true, true
			}
			for _, n := range tb.nested {
				if ch, ok := n.(child); ok {
					used[ch.field] = true
				} else {
					used["Messages"] = true
				}
			}
			for i := range tb.of.NumField() {
				if f := tb.of.Field(i); f.IsExported() && !used[f.Name] {
					t.Errorf("field %s.%s is in no row of the table", tb.of, f.Name)
				}
			}
		})
	}
}

package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Error is one problem in the configuration, with where the offending value
// was written. Range is the zero value for values that did not come from a
// file; for values taken from the environment its Filename is the variable,
// such as "$NOMAD_ADDR", and it has no line.
type Error struct {
	Range hcl.Range
	Msg   string
}

// Error formats the error as "file:line:col: message".
func (e *Error) Error() string {
	switch {
	case e.Range.Filename == "":
		return e.Msg
	case e.Range.Start.Line == 0:
		return fmt.Sprintf("%s: %s", e.Range.Filename, e.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.Range.Filename, e.Range.Start.Line, e.Range.Start.Column, e.Msg)
	}
}

// Errors is every problem found at once. Compile and Load return it (as an
// error) sorted by position, problems without a position last.
type Errors []*Error

// Error formats the errors one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		ar, br := a.Range, b.Range
		if (ar.Filename == "") != (br.Filename == "") {
			if ar.Filename == "" {
				return 1
			}
			return -1
		}
		return cmp.Or(
			cmp.Compare(ar.Filename, br.Filename),
			cmp.Compare(ar.Start.Line, br.Start.Line),
			cmp.Compare(ar.Start.Column, br.Start.Column),
		)
	})
}

// orNil returns es as an error, or nil if it is empty (never a typed nil).
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	es.sort()
	return es
}

// fromDiags converts HCL error diagnostics.
func fromDiags(diags hcl.Diagnostics) Errors {
	var es Errors
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		e := &Error{Msg: d.Summary}
		if d.Detail != "" {
			e.Msg += ": " + d.Detail
		}
		if d.Subject != nil {
			e.Range = *d.Subject
		}
		es = append(es, e)
	}
	return es
}

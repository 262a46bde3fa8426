package history

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// WriteHalts writes the last halts and resumes of the failure budgets (the
// halt state's log, oldest first): when, which scope, and who resumed it or
// why it halted. Nothing when there are none.
func WriteHalts(w io.Writer, log []policy.HaltEvent) error {
	if len(log) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nHalts and resumes (failure budgets):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  At\tScope\tEvent\tBy or why")
	for _, e := range log {
		what := e.Reason
		if e.Event == "resumed" {
			what = e.By
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), policy.ScopeName(e.Scope), e.Event, what)
	}
	return tw.Flush()
}

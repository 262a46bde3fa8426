package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// HaltStore is where Read reads the failure budgets' halt state;
// *store.Store implements it.
type HaltStore interface {
	Halts(ctx context.Context) (policy.HaltState, uint64, error)
}

// Halt is a scope halted by its failure budget: no new drain starts there
// until `rollboot resume` (Resume says the command).
type Halt struct {
	// Scope is the group's name, "" for the whole rollout.
	Scope    string           `json:"scope"`
	Text     string           `json:"text"`
	Since    string           `json:"since"`
	Failures []policy.Failure `json:"failures,omitempty"`
	Resume   string           `json:"resume"`
}

// readHalts adds to v the halts stored: each holds until it is resumed. What
// cannot be read is said in HaltProblem.
func readHalts(ctx context.Context, v *View, st HaltStore) {
	hs, _, err := st.Halts(ctx)
	if err != nil {
		v.HaltProblem = fmt.Sprintf("cannot read the failure budgets' halt state (the coordinator starts no drain meanwhile): %v", err)
		return
	}
	scopes := make([]string, 0, len(hs.Halts))
	for s := range hs.Halts {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	for _, scope := range scopes {
		h := hs.Halts[scope]
		resume := "rollboot resume"
		if scope != policy.RolloutScope {
			resume += " -group " + scope
		}
		v.Halts = append(v.Halts, Halt{Scope: scope, Text: h.Text(), Since: h.Since.UTC().Format(time.RFC3339),
			Failures: h.Failures, Resume: resume})
	}
}

// writeHalts writes a banner line for each halt, at the top of the status.
func writeHalts(w io.Writer, v View) {
	for _, h := range v.Halts {
		fmt.Fprintf(w, "HALTED: %s\n", h.Text)
	}
	if v.HaltProblem != "" {
		fmt.Fprintf(w, "HALT STATE UNKNOWN: %s\n", v.HaltProblem)
	}
	if len(v.Halts) > 0 || v.HaltProblem != "" {
		fmt.Fprintln(w)
	}
}

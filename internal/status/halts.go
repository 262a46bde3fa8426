package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// HaltStore is where Read reads the failure budgets' halt state and the
// policy that says which halts hold; *store.Store implements it.
type HaltStore interface {
	Halts(ctx context.Context) (policy.HaltState, uint64, error)
	Policy(ctx context.Context) (store.PolicyRecord, error)
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

// readHalts adds to v the halts in force: those whose scope's budget the
// stored policy sets, or that have a reason of their own; every stored halt
// when the policy cannot be read (the safe side). What cannot be read is said
// in HaltProblem.
func readHalts(ctx context.Context, v *View, st HaltStore) {
	hs, _, err := st.Halts(ctx)
	if err != nil {
		v.HaltProblem = fmt.Sprintf("cannot read the failure budgets' halt state (the coordinator holds the groups with a budget meanwhile): %v", err)
		return
	}
	bs, known := storedBudgets(ctx, st)
	for _, scope := range sortedScopes(hs.Halts) {
		h := hs.Halts[scope]
		if known && !policy.InForce(bs, h) {
			continue
		}
		resume := "rollboot resume"
		if scope != policy.RolloutScope {
			resume += " -group " + scope
		}
		v.Halts = append(v.Halts, Halt{Scope: scope, Text: h.Text(), Since: h.Since.UTC().Format("2006-01-02T15:04:05Z07:00"),
			Failures: h.Failures, Resume: resume})
	}
}

// storedBudgets are the failure budgets of the stored policy; false when it
// cannot be read or used.
func storedBudgets(ctx context.Context, st HaltStore) (policy.FailureBudgets, bool) {
	rec, err := st.Policy(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return policy.FailureBudgets{}, true
	}
	if err != nil {
		return policy.FailureBudgets{}, false
	}
	p, err := config.ParsePolicy([]byte(rec.Source), rec.Filename)
	if err != nil {
		return policy.FailureBudgets{}, false
	}
	r, err := config.CompilePolicy(p)
	if err != nil {
		return policy.FailureBudgets{}, false
	}
	return r.FailureBudgets(), true
}

func sortedScopes(m map[string]policy.Halt) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
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

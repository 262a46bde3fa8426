package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Policy is what the status says of the stored policy and the coordinator that
// enforces it.
type Policy struct {
	// Stored is the stored policy's version (0: none is stored), and StoredError
	// why it cannot be read.
	Stored      int    `json:"stored_version"`
	StoredError string `json:"stored_error,omitempty"`
	// Leader is the leading coordinator, as it last said (none: no coordinator
	// has led yet); Enforced the version it enforces (0: the safe default, or no
	// good version with Problem); Problem why it cannot use the stored policy.
	Leader      string    `json:"leader,omitempty"`
	LeaderSince time.Time `json:"leader_since,omitzero"`
	Enforced    int       `json:"enforced_version"`
	Problem     string    `json:"problem,omitempty"`
	// ReadError says why the coordinator's word cannot be read.
	ReadError string `json:"read_error,omitempty"`
}

// PolicyStore is the part of *store.Store that readPolicy uses.
type PolicyStore interface {
	Policy(ctx context.Context) (store.PolicyRecord, error)
	Enforcement(ctx context.Context) (store.Enforcement, error)
}

// readPolicy reads the stored policy's version and what the leader enforces.
// What cannot be read is said in the result, not an error: the rest of the
// status stands.
func readPolicy(ctx context.Context, st PolicyStore) Policy {
	var p Policy
	rec, err := st.Policy(ctx)
	switch {
	case err == nil:
		p.Stored = rec.Version
	case errors.Is(err, store.ErrNotFound):
	default:
		p.Stored, p.StoredError = rec.Version, err.Error()
	}
	e, err := st.Enforcement(ctx)
	switch {
	case err == nil:
		p.Leader, p.LeaderSince, p.Enforced, p.Problem = e.Leader, e.Since, e.PolicyVersion, e.PolicyProblem
	case errors.Is(err, store.ErrNotFound):
	default:
		p.ReadError = err.Error()
	}
	return p
}

// writePolicy writes the policy lines of the text status.
func writePolicy(w io.Writer, p Policy) {
	switch {
	case p.ReadError != "":
		fmt.Fprintf(w, "Coordinator: cannot tell which policy it enforces: %s\n", p.ReadError)
	case p.Leader == "":
		fmt.Fprintln(w, "Coordinator: none has said yet which policy it enforces")
	default:
		fmt.Fprintf(w, "Coordinator: %s\n", p.Leader)
	}
	fmt.Fprintf(w, "Policy: %s\n\n", p.Text())
}

// Text says which policy applies, as `rollboot status` and the status page
// show it.
func (p Policy) Text() string {
	stored := fmt.Sprintf("version %d stored", p.Stored)
	if p.Stored == 0 && p.StoredError == "" {
		stored = "none stored"
	}
	switch {
	case p.Problem != "":
		last := fmt.Sprintf("version %d", p.Enforced)
		if p.Enforced == 0 {
			last = "the safe default rules"
		}
		return fmt.Sprintf("HELD: no new reboot starts: %s; hosts in a cycle finish it with %s", p.Problem, last)
	case p.StoredError != "":
		return fmt.Sprintf("the stored policy cannot be read: %s", p.StoredError)
	case p.Leader == "" || p.ReadError != "":
		return stored
	case p.Enforced == 0 && p.Stored == 0:
		return `none stored: the safe default applies (one group "default", one host at a time, always open); rollboot policy apply FILE sets one`
	case p.Enforced != p.Stored:
		return fmt.Sprintf("version %d enforced, %s (not yet taken)", p.Enforced, stored)
	}
	return fmt.Sprintf("version %d enforced", p.Enforced)
}

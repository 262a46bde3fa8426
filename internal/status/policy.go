package status

import (
	"context"
	"errors"
	"fmt"
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
	// LeaderGone: the election lock changed since Leader took it (released,
	// expired, or taken by another that has not said so yet), so Leader no
	// longer leads. LockError says why that cannot be told.
	LeaderGone bool   `json:"leader_gone,omitempty"`
	LockError  string `json:"lock_error,omitempty"`
	Enforced   int    `json:"enforced_version"`
	Problem    string `json:"problem,omitempty"`
	// NodeWatch, when set, says that the leader follows the nodes with
	// blocking queries because Nomad's node event stream cannot be had.
	NodeWatch string `json:"node_watch,omitempty"`
	// Slots is each group's slot limit as the leader last computed it: every
	// group of the policy it enforces (none: not said yet).
	Slots map[string]int `json:"group_slots,omitempty"`
	// ReadError says why the coordinator's word cannot be read.
	ReadError string `json:"read_error,omitempty"`
}

// PolicyStore is the part of *store.Store that readPolicy uses.
type PolicyStore interface {
	Policy(ctx context.Context) (store.PolicyRecord, error)
	Enforcement(ctx context.Context) (store.Enforcement, error)
	LeaderLockIndex(ctx context.Context) (uint64, error)
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
		p.NodeWatch, p.Slots = e.NodeWatch, e.Slots
		p.LeaderGone, p.LockError = leaderGone(ctx, st, e)
	case errors.Is(err, store.ErrNotFound):
	default:
		p.ReadError = err.Error()
	}
	return p
}

// leaderGone tells whether the coordinator that wrote e no longer holds the
// election lock: the lock's index is no longer the one it read when its term
// began (store.LeaderLockIndex). A record without that index (no lock, or an
// older rollboot's) tells nothing.
func leaderGone(ctx context.Context, st PolicyStore, e store.Enforcement) (gone bool, problem string) {
	if e.LockIndex == 0 {
		return false, ""
	}
	idx, err := st.LeaderLockIndex(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true, "" // the lock's variable is gone
	case err != nil:
		return false, err.Error()
	}
	return idx != e.LockIndex, ""
}

// policy writes the policy lines of the text status.
func (t text) policy(p Policy) {
	switch {
	case p.ReadError != "":
		t.para("Coordinator: ", "cannot tell which policy it enforces: "+p.ReadError)
	default:
		t.para("Coordinator: ", p.Coordinator())
	}
	t.para("Policy: ", p.Text())
	fmt.Fprintln(t.w)
}

// Leads reports whether a coordinator leads as far as the status can tell:
// one said so and still holds the election lock (or that cannot be told).
func (p Policy) Leads() bool { return p.Leader != "" && !p.LeaderGone }

// Coordinator says which coordinator leads, as `rollboot status` and the
// status page show it.
func (p Policy) Coordinator() string {
	switch {
	case p.Leader == "":
		return "none has said yet which policy it enforces"
	case p.LeaderGone:
		return fmt.Sprintf("none leads that has said so: %s, the last to say it led, no longer holds the election lock (released, expired, or taken by a coordinator that has not said so yet)", p.Leader)
	case p.LockError != "":
		return fmt.Sprintf("%s (cannot tell whether it still holds the election lock: %s)", p.Leader, p.LockError)
	case p.NodeWatch != "":
		return fmt.Sprintf("%s; it follows the nodes with %s", p.Leader, p.NodeWatch)
	}
	return p.Leader
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
	case p.LeaderGone:
		return stored + "; nothing is enforced while no coordinator leads"
	case p.Enforced == 0 && p.Stored == 0:
		return `none stored: the safe default applies (one group "default", one host at a time, always open); rollboot policy apply FILE sets one`
	case p.Enforced != p.Stored:
		return fmt.Sprintf("version %d enforced, %s (not yet taken)", p.Enforced, stored)
	}
	return fmt.Sprintf("version %d enforced", p.Enforced)
}

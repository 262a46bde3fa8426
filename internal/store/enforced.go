package store

import (
	"context"
	"maps"
	"time"
)

// Enforcement is what the leading coordinator enforces, <prefix>/coordinator:
// who leads and which version of the stored policy it decides with. The
// coordinator writes it when it starts to lead and when that changes, never
// on every pass; `rollboot status` and the status page read it.
type Enforcement struct {
	// Leader is the leading coordinator's identity (host name and process).
	Leader string
	// PolicyVersion is the version of the stored policy enforced; 0 means none
	// is stored and the safe default applies (or, with PolicyProblem, that the
	// coordinator never had a good one).
	PolicyVersion int
	// PolicyProblem, when set, says why the stored policy cannot be used: no
	// new reboot starts, and the hosts in a cycle finish it with PolicyVersion.
	PolicyProblem string
	// Since is when the leader wrote this.
	Since time.Time
	// LockIndex is the election lock's ModifyIndex when the leader read it at
	// the start of its term (LeaderLockIndex); 0 when unknown (no lock, or a
	// record of a rollboot that did not write it). While the leader holds the
	// lock the index stays the same: a different one means it no longer leads.
	LockIndex uint64
	// NodeWatch, when set, says that the leader follows the nodes with
	// blocking queries because Nomad's node event stream cannot be had, and
	// why; "" while the stream works (or was never configured).
	NodeWatch string
	// Slots is each group's slot limit (policy.Slots of its size) as the
	// leader's last pass computed it, by group name: every group of the
	// enforced policy and no other. Every coordinator's status page shows it,
	// not only the leader's (docs/status-page.md). Empty until the leader's
	// first pass, or from a rollboot that did not write it.
	Slots       map[string]int
	ModifyIndex uint64
}

// enforcementCodec is the schema of the enforcement record.
var enforcementCodec = codec[Enforcement]{version: 1, fields: []field[Enforcement]{
	text("leader", func(e *Enforcement) *string { return &e.Leader }),
	number("policy_version", func(e *Enforcement) *int { return &e.PolicyVersion }, true),
	text("policy_problem", func(e *Enforcement) *string { return &e.PolicyProblem }),
	instant("since", func(e *Enforcement) *time.Time { return &e.Since }, false),
	counter("lock_index", func(e *Enforcement) *uint64 { return &e.LockIndex }),
	text("node_watch", func(e *Enforcement) *string { return &e.NodeWatch }),
	object("slots", func(e *Enforcement) *map[string]int { return &e.Slots }, noEntries[string, int]),
}}

// LeaderLockIndex is the ModifyIndex of the election lock's variable, which
// every token that may read it sees (the lock itself is shown to management
// tokens only). Acquiring, releasing and the expiry of the lock each change it
// (Raft writes: nomad/state/state_store_variables.go VarLockAcquire,
// VarLockRelease; an expiry is a release, nomad/locks.go); renewing does not
// (nomad/variables_endpoint.go RenewLock resets the leader's timer only). So it
// stays the same exactly while one coordinator holds the lock. ErrNotFound when
// no coordinator ever took it.
func (s *Store) LeaderLockIndex(ctx context.Context) (uint64, error) {
	_, idx, err := s.read(ctx, s.LeaderPath(), 0, 0)
	return idx, err
}

func (s *Store) enforcementPath() string { return s.prefix + "/coordinator" }

// Enforcement reads what the leading coordinator last said it enforces:
// ErrNotFound when no coordinator has led yet.
func (s *Store) Enforcement(ctx context.Context) (Enforcement, error) {
	v, _, err := s.read(ctx, s.enforcementPath(), 0, 0)
	if err != nil {
		return Enforcement{}, err
	}
	e, err := decodeStrict(enforcementCodec, v.Path, v.Items)
	e.ModifyIndex = v.ModifyIndex
	return e, err
}

// PutEnforcement stores e with check-and-set on checkIndex (0: create); it
// returns the new ModifyIndex, or ErrConflict.
func (s *Store) PutEnforcement(ctx context.Context, e Enforcement, checkIndex uint64) (uint64, error) {
	return s.write(ctx, s.enforcementPath(), enforcementCodec.encode(e), checkIndex)
}

// Equal reports whether e and o say the same, but for when and the index.
func (e Enforcement) Equal(o Enforcement) bool {
	return e.Leader == o.Leader && e.PolicyVersion == o.PolicyVersion && e.PolicyProblem == o.PolicyProblem &&
		e.NodeWatch == o.NodeWatch && maps.Equal(e.Slots, o.Slots)
}

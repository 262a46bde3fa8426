// Package enforcement writes the leading coordinator's enforcement record
// (store.Enforcement) for `rollboot status` and the status page: who leads,
// the stored policy it enforces or why it cannot, how it follows the nodes,
// and each group's slot limit, written only when that changed in the term.
package enforcement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Store reads and writes the enforcement record and reads the election lock's
// index; *store.Store implements it.
type Store interface {
	Enforcement(ctx context.Context) (store.Enforcement, error)
	PutEnforcement(ctx context.Context, e store.Enforcement, index uint64) (uint64, error)
	LeaderLockIndex(ctx context.Context) (uint64, error)
}

// Enforced is what the leader enforces, as the record says it.
type Enforced struct {
	PolicyVersion int
	PolicyProblem string
	// Nodes: how the nodes are followed.
	Nodes nodestream.State
}

// Publisher writes the record of one coordinator: Leader names it, Now is
// its clock.
type Publisher struct {
	Store  Store
	Leader string
	Now    func() time.Time
	Log    *slog.Logger
	// published is what was last written (and its index); zero: nothing yet
	// this term.
	published store.Enforcement
	// slots: each group's slot limit as the last pass computed it, written
	// with the record (Slots).
	slots map[string]int
}

// EndTerm forgets what this term wrote: the next term writes the record
// again (another coordinator may have led in between).
func (p *Publisher) EndTerm() { p.published = store.Enforcement{} }

// Publish writes who leads and what it enforces when that changed since it
// last wrote it in this term.
func (p *Publisher) Publish(ctx context.Context, what Enforced) error {
	e := store.Enforcement{Leader: p.Leader, PolicyVersion: what.PolicyVersion, PolicyProblem: what.PolicyProblem,
		NodeWatch: nodeWatchText(what.Nodes), Slots: p.slots}
	if p.published.ModifyIndex != 0 && p.published.Equal(e) {
		return nil
	}
	cur, err := p.Store.Enforcement(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		// Unreadable (a newer rollboot wrote it): overwrite it all the same.
		p.Log.Warn("the enforcement record cannot be read: writing it again", "err", err)
	}
	e.Since = p.Now()
	if e.LockIndex, err = p.termLockIndex(ctx); err != nil {
		return fmt.Errorf("publish the enforced policy: %w", err)
	}
	idx, err := p.Store.PutEnforcement(ctx, e, cur.ModifyIndex)
	if err != nil {
		return fmt.Errorf("publish the enforced policy: %w", err)
	}
	e.ModifyIndex = idx
	p.published = e
	return nil
}

// Slots records each group's slot limit, as admission saw the groups in this
// pass, in the record when it changed: every coordinator's status page shows
// it from there, not only the leader's. A group's limit changes with its size
// and the policy, rarely: so does the record.
func (p *Publisher) Slots(ctx context.Context, groups []policy.GroupStatus, what Enforced) {
	slots := make(map[string]int, len(groups))
	for _, g := range groups {
		slots[g.Group.Name] = policy.Slots(g.Group, g.Size)
	}
	if maps.Equal(slots, p.slots) {
		return
	}
	p.slots = slots
	if err := p.Publish(ctx, what); err != nil {
		p.slots = nil // written again at the next pass
		p.Log.Warn("cannot record the groups' slot limits for the status page", "err", err)
	}
}

// termLockIndex is the election lock's index in this term, read at its first
// publication: `rollboot status` compares it with the lock's index to tell
// whether this coordinator still leads. 0 without a lock (a coordinator run
// without an election).
func (p *Publisher) termLockIndex(ctx context.Context) (uint64, error) {
	if p.published.ModifyIndex != 0 {
		return p.published.LockIndex, nil // read in this term already
	}
	idx, err := p.Store.LeaderLockIndex(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the election lock's index: %w", err)
	}
	return idx, nil
}

// nodeWatchText is what `rollboot status` says of how the nodes are followed:
// nothing while the event stream works.
func nodeWatchText(s nodestream.State) string {
	if s.Mode != nodestream.Blocking {
		return ""
	}
	return "blocking queries: the node event stream cannot be had (" + s.Reason + "); it is tried again now and then"
}

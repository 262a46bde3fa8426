// Package storedpolicy changes the rollout policy stored in the cluster
// (<prefix>/policy), as `nomad job plan` and `nomad job run` change a job: a
// file is checked (every problem at once, with file:line:col), compared with
// the stored version (its settings, and the hosts whose group changes), and
// written with check-and-set. `rollboot policy`, the demo and the tests all
// apply a policy through it.
package storedpolicy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// NodesAPI lists Nomad nodes, with a filter when given; *api.Nodes implements it.
type NodesAPI interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
}

// Check parses and checks a policy file.
func Check(src []byte, filename string) (*config.Rules, error) {
	pf, err := config.ParsePolicy(src, filename)
	if err != nil {
		return nil, err
	}
	return config.CompilePolicy(pf)
}

// Compile parses and checks the source of a stored policy.
func Compile(rec store.PolicyRecord) (*config.Rules, error) {
	name := rec.Filename
	if name == "" {
		name = "policy.hcl"
	}
	return Check([]byte(rec.Source), name)
}

// Change is a policy file checked and compared with the stored policy, ready to
// be applied.
type Change struct {
	Source   []byte
	Filename string
	Rules    *config.Rules
	// Current is the stored policy (Current.Version 0: none is stored), and
	// CurrentErr why it cannot be used (unreadable, or invalid): the settings
	// are then compared with the safe default.
	Current    store.PolicyRecord
	CurrentErr error
	// Settings are the settings that change; Moves the hosts whose group
	// changes, from the node list.
	Settings []SettingChange
	Moves    []Move
}

// Prepare checks the file and compares it with the stored policy. A file that
// does not pass its checks is an error (config.Errors) and nothing else is read.
func Prepare(ctx context.Context, st *store.Store, nodes NodesAPI, src []byte, filename string) (*Change, error) {
	r, err := Check(src, filename)
	if err != nil {
		return nil, err
	}
	ch := &Change{Source: src, Filename: filename, Rules: r}
	cur, err := st.Policy(ctx)
	old := config.DefaultRules()
	switch {
	case errors.Is(err, store.ErrNotFound):
	case errors.Is(err, store.ErrUnreadable), errors.Is(err, store.ErrUnknownVersion):
		ch.Current, ch.CurrentErr = cur, err
	case err != nil:
		return nil, fmt.Errorf("read the stored policy: %w", err)
	default:
		ch.Current = cur
		if o, err := Compile(cur); err != nil {
			ch.CurrentErr = err
		} else {
			old = o
		}
	}
	ch.Settings = DiffSettings(old, r)
	if nodes != nil {
		if ch.Moves, err = moves(ctx, nodes, old.Policy(), r.Policy()); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// Unchanged reports whether the file is the stored version, byte for byte:
// applying it would only push a real version out of the history kept.
func (ch *Change) Unchanged() bool {
	return ch.Current.Version > 0 && ch.CurrentErr == nil && string(ch.Source) == ch.Current.Source
}

// Apply stores the change as the next version, applied by `by` at now, with
// check-and-set: on checkIndex when given (0: only if no policy is stored),
// else on the index the stored policy had when Prepare read it. Someone who
// applied in between makes it fail with store.ErrConflict, with the index and
// version stored now, and nothing is written. The previous version goes to
// the history.
func (ch *Change) Apply(ctx context.Context, st *store.Store, by string, now time.Time, checkIndex *uint64) (store.PolicyRecord, error) {
	idx := ch.Current.ModifyIndex
	if checkIndex != nil {
		idx = *checkIndex
	}
	// Positions in the stored policy name the file, not the folder it was in.
	rec := store.PolicyRecord{PolicyVersion: store.PolicyVersion{
		Version: ch.Current.Version + 1, Source: string(ch.Source), Filename: filepath.Base(ch.Filename),
		AppliedBy: by, AppliedAt: now.UTC(),
	}}
	if ch.Current.Version > 0 {
		rec.History = append([]store.PolicyVersion{ch.Current.PolicyVersion}, ch.Current.History...)
	}
	n, err := st.PutPolicy(ctx, rec, idx)
	if errors.Is(err, store.ErrConflict) {
		return rec, conflict(ctx, st, err, idx, checkIndex != nil)
	}
	if err != nil {
		return rec, err
	}
	rec.ModifyIndex = n
	return rec, nil
}

// conflict says why the check-and-set on idx failed: what is stored now.
func conflict(ctx context.Context, st *store.Store, err error, idx uint64, given bool) error {
	now := "none is stored"
	if cur, rerr := st.Policy(ctx); rerr == nil {
		now = fmt.Sprintf("version %d is stored, applied by %s at %s, at modify index %d",
			cur.Version, cur.AppliedBy, cur.AppliedAt.UTC().Format(time.RFC3339), cur.ModifyIndex)
	} else if !errors.Is(rerr, store.ErrNotFound) {
		now = "the stored policy cannot be read: " + rerr.Error()
	}
	if given {
		want := fmt.Sprintf("modify index %d", idx)
		if idx == 0 {
			want = "no policy stored"
		}
		return fmt.Errorf("%w: -check-index wants %s, but %s; nothing was written", err, want, now)
	}
	return fmt.Errorf("%w: the stored policy changed since it was read (modify index %d): someone applied another version: %s; run `rollboot policy show` and apply again", err, idx, now)
}

// Move is a host whose group changes.
type Move struct {
	Host     string // the node's name
	From, To string
}

// moves lists the nodes whose group differs between two policies, as the
// coordinator assigns them: each group's filter evaluated by Nomad, the first
// group in order that matches.
func moves(ctx context.Context, nodes NodesAPI, old, new policy.Policy) ([]Move, error) {
	list, _, err := nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	from, err := assign(ctx, nodes, list, old)
	if err != nil {
		return nil, err
	}
	to, err := assign(ctx, nodes, list, new)
	if err != nil {
		return nil, err
	}
	var out []Move
	for _, n := range list {
		if from[n.ID] != to[n.ID] {
			out = append(out, Move{Host: n.Name, From: from[n.ID], To: to[n.ID]})
		}
	}
	return out, nil
}

func assign(ctx context.Context, nodes NodesAPI, list []*api.NodeListStub, p policy.Policy) (map[string]string, error) {
	out := map[string]string{}
	for _, g := range p.Groups {
		members := list
		if expr := g.FilterExpression(); expr != "" {
			var err error
			members, _, err = nodes.List((&api.QueryOptions{Filter: expr}).WithContext(ctx))
			if err != nil {
				return nil, fmt.Errorf("list nodes of group %s: %w", g.Name, err)
			}
		}
		for _, n := range members {
			if _, ok := out[n.ID]; !ok {
				out[n.ID] = g.Name
			}
		}
	}
	for _, n := range list {
		if _, ok := out[n.ID]; !ok {
			out[n.ID] = p.Default.Name
		}
	}
	return out, nil
}

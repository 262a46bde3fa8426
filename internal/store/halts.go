package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// The halt state of the failure budgets (package policy, halt.go): the
// failures the coordinator recorded, the scopes halted and the operators'
// resumes, in one variable. Two writers, both with check-and-set: the leading
// coordinator (failures and halts) and `rollboot resume` (a resume lifts a
// halt).

func (s *Store) haltsPath() string { return s.prefix + "/halts" }

// haltsVersion is the schema version of the halts variable: one this rollboot
// does not know is refused whole (the coordinator then holds, failing closed).
const haltsVersion = "1"

// maxFailureDetail bounds a failure's detail as stored, so that
// policy.MaxFailuresKept failures fit in a variable.
const maxFailureDetail = 160

// Halts returns the halt state and the variable's ModifyIndex; an absent
// variable is the empty state at index 0. A variable that cannot be read
// (another version, an item that does not decode) is an error wrapping
// ErrUnreadable.
func (s *Store) Halts(ctx context.Context) (policy.HaltState, uint64, error) {
	v, _, err := s.read(ctx, s.haltsPath(), 0, 0)
	if errors.Is(err, ErrNotFound) {
		return policy.HaltState{}, 0, nil
	}
	if err != nil {
		return policy.HaltState{}, 0, err
	}
	st, err := decodeHalts(v.Items)
	if err != nil {
		return policy.HaltState{}, v.ModifyIndex, fmt.Errorf("variable %s: %w: %v", v.Path, ErrUnreadable, err)
	}
	return st, v.ModifyIndex, nil
}

func decodeHalts(items map[string]string) (policy.HaltState, error) {
	var st policy.HaltState
	if v := items["version"]; v != haltsVersion {
		return st, fmt.Errorf("version %q: this rollboot reads version %s", v, haltsVersion)
	}
	for key, into := range map[string]any{"failures": &st.Failures, "halts": &st.Halts, "resumes": &st.Resumes, "log": &st.Log} {
		if items[key] == "" {
			continue
		}
		if err := json.Unmarshal([]byte(items[key]), into); err != nil {
			return st, fmt.Errorf("item %q: %v", key, err)
		}
	}
	for i := range st.Failures {
		st.Failures[i].Detail = CleanText(st.Failures[i].Detail)
	}
	return st, nil
}

// PutHalts stores the halt state with check-and-set on index (0: create the
// variable); ErrConflict when someone wrote it since.
func (s *Store) PutHalts(ctx context.Context, st policy.HaltState, index uint64) (uint64, error) {
	for i, f := range st.Failures {
		if len(f.Detail) > maxFailureDetail {
			st.Failures[i].Detail = f.Detail[:maxFailureDetail]
		}
	}
	items := map[string]string{"version": haltsVersion}
	for key, v := range map[string]any{"failures": st.Failures, "halts": st.Halts, "resumes": st.Resumes, "log": st.Log} {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, fmt.Errorf("encode halts: %w", err)
		}
		items[key] = string(b)
	}
	return s.write(ctx, s.haltsPath(), items, index)
}

// WatchHalts blocks until the halts variable changes past index (with index >
// 0) or wait passes, and returns its index (while it does not exist: absent.go).
func (s *Store) WatchHalts(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return s.watchOne(ctx, s.haltsPath(), index, wait)
}

// UpdateHalts applies fn to the halt state as stored and writes the result
// when fn says it changed, with check-and-set, starting again from a fresh
// read on a conflict (up to 10 times). It returns the state written (or read,
// when nothing changed).
func (s *Store) UpdateHalts(ctx context.Context, fn func(policy.HaltState) (policy.HaltState, bool)) (policy.HaltState, error) {
	for range 10 {
		st, idx, err := s.Halts(ctx)
		if err != nil {
			return st, err
		}
		next, changed := fn(st)
		if !changed {
			return st, nil
		}
		if _, err := s.PutHalts(ctx, next, idx); errors.Is(err, ErrConflict) {
			continue
		} else if err != nil {
			return st, err
		}
		return next, nil
	}
	return policy.HaltState{}, fmt.Errorf("write %s: %w (10 times)", s.haltsPath(), ErrConflict)
}

package policykeep

import (
	"context"
	"errors"
	"log/slog"
	"testing"
)

// The stored policy is read again only when its watch saw a change; a policy
// that cannot be used keeps the rules in force, and says why, until a good one
// is read; a read that fails fails the pass.
func TestRefresh(t *testing.T) {
	ctx := context.Background()
	k := &Keeper{Log: slog.New(slog.DiscardHandler)}
	var reads int
	answer := func(v int, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { reads++; return v, err }
	}
	version := func(v int) int { return v }
	steps := []struct {
		name        string
		gen         uint64
		read        func(context.Context) (int, error)
		take, fails bool
		reads       int
		problem     bool
		version     int
	}{
		{"first", 1, answer(3, nil), true, false, 1, false, 3},
		{"no change", 1, answer(4, nil), false, false, 1, false, 3},
		{"invalid", 2, answer(0, &InvalidError{Version: 4, Err: errors.New("p.hcl:1:1: bad")}), false, false, 2, true, 3},
		{"unreadable", 3, answer(0, errors.New("connection refused")), false, true, 3, true, 3},
		{"valid again", 3, answer(5, nil), true, false, 4, false, 5},
	}
	for _, s := range steps {
		r, take, err := Refresh(ctx, k, s.gen, true, s.read, version)
		if take != s.take || (err != nil) != s.fails || reads != s.reads || (k.Problem != "") != s.problem || k.Version != s.version {
			t.Fatalf("%s: rules %d take %v err %v, %d reads, keeper %+v", s.name, r, take, err, reads, k)
		}
		if take && r != s.version {
			t.Fatalf("%s: took rules %d, want %d", s.name, r, s.version)
		}
	}
	if !k.Loaded {
		t.Error("not loaded after answers")
	}
	k.EndTerm()
	if _, _, err := Refresh(ctx, k, 3, true, answer(5, nil), version); err != nil || reads != 5 {
		t.Errorf("a new term: %d reads (%v), want the policy read again", reads, err)
	}
}

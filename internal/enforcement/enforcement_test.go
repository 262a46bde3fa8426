package enforcement

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// fakeStore keeps one record; it counts the writes and the lock reads, and
// fails the writes while failing is set.
type fakeStore struct {
	rec               store.Enforcement
	writes, lockReads int
	failing           bool
}

func (f *fakeStore) Enforcement(context.Context) (store.Enforcement, error) {
	if f.rec.ModifyIndex == 0 {
		return store.Enforcement{}, store.ErrNotFound
	}
	return f.rec, nil
}

func (f *fakeStore) PutEnforcement(_ context.Context, e store.Enforcement, index uint64) (uint64, error) {
	if f.failing {
		return 0, errors.New("write refused")
	}
	if index != f.rec.ModifyIndex {
		return 0, store.ErrConflict
	}
	f.writes++
	e.ModifyIndex = f.rec.ModifyIndex + 1
	f.rec = e
	return e.ModifyIndex, nil
}

func (f *fakeStore) LeaderLockIndex(context.Context) (uint64, error) {
	f.lockReads++
	return 42, nil
}

// The record is written once per change in a term, with the lock's index read
// once per term; a new term writes it again, and slot limits that could not
// be written are written at the next pass.
func TestWrittenOnlyWhenChanged(t *testing.T) {
	ctx := context.Background()
	st := &fakeStore{}
	p := Publisher{Store: st, Leader: "c1", Now: func() time.Time { return time.Unix(1, 0) }, Log: slog.New(slog.DiscardHandler)}
	v1 := Enforced{PolicyVersion: 1}
	steps := []struct {
		name           string
		do             func() error
		writes, locked int
	}{
		{"first", func() error { return p.Publish(ctx, v1) }, 1, 1},
		{"same again", func() error { return p.Publish(ctx, v1) }, 1, 1},
		{"blocking queries", func() error {
			return p.Publish(ctx, Enforced{PolicyVersion: 1, Nodes: nodestream.State{Mode: nodestream.Blocking, Reason: "403"}})
		}, 2, 1},
		{"a new term", func() error { p.EndTerm(); return p.Publish(ctx, v1) }, 3, 2},
		{"slots unwritable", func() error {
			st.failing = true
			p.Slots(ctx, []policy.GroupStatus{{Group: policy.Group{Name: "web", Concurrency: 2}, Size: 4}}, v1)
			st.failing = false
			return nil
		}, 3, 2},
		{"slots at the next pass", func() error {
			p.Slots(ctx, []policy.GroupStatus{{Group: policy.Group{Name: "web", Concurrency: 2}, Size: 4}}, v1)
			return nil
		}, 4, 2},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if st.writes != s.writes || st.lockReads != s.locked {
			t.Fatalf("%s: %d writes and %d lock reads, want %d and %d", s.name, st.writes, st.lockReads, s.writes, s.locked)
		}
	}
	if st.rec.LockIndex != 42 || st.rec.Leader != "c1" || st.rec.Slots["web"] != 2 || st.rec.NodeWatch != "" {
		t.Errorf("record %+v", st.rec)
	}
}

package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// The halt state round-trips with check-and-set; UpdateHalts starts again on
// a conflict; a variable of another version is refused whole (the coordinator
// then holds the scopes with a budget).
func TestHaltsRoundTripAndVersion(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	if hs, idx, err := st.Halts(ctx); err != nil || idx != 0 || len(hs.Halts) != 0 {
		t.Fatalf("absent: %+v %d %v", hs, idx, err)
	}
	long := strings.Repeat("x", 400)
	in := policy.HaltState{Failures: []policy.Failure{{Host: "web-1", Group: "web", Grant: "g1", Kind: policy.FailStuck, At: at, Detail: long}},
		Halts: map[string]policy.Halt{"web": {Scope: "web", Since: at, Failures: []policy.Failure{{Host: "web-1", Kind: policy.FailStuck}}}}}
	idx, err := st.PutHalts(ctx, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutHalts(ctx, in, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second create: %v, want a conflict", err)
	}
	out, idx2, err := st.Halts(ctx)
	if err != nil || idx2 != idx || out.Halts["web"].Since != at || out.Failures[0].Kind != policy.FailStuck || len(out.Failures[0].Detail) != 160 {
		t.Fatalf("read back %+v %d %v", out, idx2, err)
	}
	got, err := st.UpdateHalts(ctx, func(hs policy.HaltState) (policy.HaltState, bool) {
		return policy.Lift(hs, "web", policy.Resume{At: at, By: "ops"})
	})
	if err != nil || len(got.Halts) != 0 || got.Resumes["web"].By != "ops" {
		t.Fatalf("UpdateHalts: %+v %v", got, err)
	}
	v, _, err := c.Variables().Read("rollboot/halts", nil)
	if err != nil {
		t.Fatal(err)
	}
	v.Items = api.VariableItems{"version": "2", "halts": "{}"}
	if _, _, err := c.Variables().CheckedUpdate(v, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Halts(ctx); !errors.Is(err, store.ErrUnreadable) || !strings.Contains(err.Error(), `version "2"`) {
		t.Errorf("a newer version: %v, want unreadable", err)
	}
}

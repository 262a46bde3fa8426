package coordinator

import (
	"maps"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// The leader records each group's slot limit in the enforcement record, so
// that every coordinator's status page shows it, and writes it again only
// when a limit changes.
func TestSlotsInEnforcementRecord(t *testing.T) {
	_, client, st := simStore(t, nomadsim.Config{Clients: 4, HeartbeatTTL: time.Hour})
	ctx := t.Context()
	src := &countedPolicy{rules: rules.Rules{Version: 1, DefaultGroup: policy.Group{Name: "all", Concurrency: 2}}, index: 10}
	co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: st, Policy: src}})
	pass := func() store.Enforcement {
		t.Helper()
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := st.Enforcement(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := pass()
	if want := map[string]int{"all": 2}; !maps.Equal(e.Slots, want) {
		t.Fatalf("slots %v, want %v", e.Slots, want)
	}
	if again := pass(); again.ModifyIndex != e.ModifyIndex {
		t.Errorf("the record was written again (index %d, then %d) with the same limits", e.ModifyIndex, again.ModifyIndex)
	}
	src.rules.Version, src.rules.DefaultGroup.Concurrency = 2, 1
	if e = pass(); !maps.Equal(e.Slots, map[string]int{"all": 1}) {
		t.Errorf("slots %v after the limit changed, want all: 1", e.Slots)
	}
}

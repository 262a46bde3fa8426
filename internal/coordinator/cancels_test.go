package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// A host's request variable written by a newer rollboot is read as a cancel and
// never overwritten. The coordinator's attempt to forget that cancel must not fail
// its pass: a failed pass holds up every host of the fleet.
func TestNewerRequestVariableDoesNotFailThePass(t *testing.T) {
	log := &callLog{}
	vars := newMemVars(log)
	st := store.New(vars, "rollboot", "")
	ctx := context.Background()
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "a", NodeID: "n-a", BootID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vars.CheckedCreate(&api.Variable{Path: "rollboot/requests/a", Items: api.VariableItems{
		"version": "99", "host": "a", "cancel_at": t0.Add(-time.Hour).Format(time.RFC3339)}}, nil); err != nil {
		t.Fatal(err)
	}
	stubs := []*api.NodeListStub{{ID: "n-a", Name: "a", Status: "ready", SchedulingEligibility: "eligible"}}
	c := New(Options{
		Deps:    Deps{Nodes: recNodes{log: log, nodes: stubs}, Store: st},
		Rules:   rules.Rules{Timing: timing},
		Runtime: Runtime{Now: func() time.Time { return t0 }},
	})
	for pass := 1; pass <= 2; pass++ {
		if err := c.ReconcileOnce(ctx); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	v, _, err := vars.Read("rollboot/requests/a", nil)
	if err != nil || v.Items["version"] != "99" {
		t.Fatalf("the newer variable was changed: %+v, %v", v, err)
	}
	ctl, err := st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctl.Cancels["a"].IsZero() || len(ctl.Problems) == 0 {
		t.Fatalf("the newer variable should read as a cancel and be reported: %+v", ctl)
	}
}

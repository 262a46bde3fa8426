package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// handedOn counts what the notifier and the metadata publisher were handed.
type handedOn struct {
	states []notify.State
	metas  []map[string]nodemeta.Meta
}

func (h *handedOn) Observe(s notify.State)                           { h.states = append(h.states, s) }
func (h *handedOn) Run(context.Context, func(context.Context) error) {}

type metaHanded struct{ h *handedOn }

func (m metaHanded) Observe(w map[string]nodemeta.Meta)               { m.h.metas = append(m.h.metas, w) }
func (m metaHanded) Run(context.Context, func(context.Context) error) {}

// Passes over a cluster where nothing moved hand the notifier and the metadata
// publisher nothing new; a change of a plan, a record or the pause flag hands
// them the new state, whole.
func TestHandedOnOnlyAfterAChange(t *testing.T) {
	cl := newBenchCluster(t, 3)
	h := &handedOn{}
	co := New(Options{
		Deps: Deps{Nodes: cl.client.Nodes(), Store: cl.store, Notifier: h, NodeMeta: metaHanded{h}},
		Rules: rules.Rules{
			Groups: cl.groups,
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
	})
	ctx := t.Context()
	pass := func(states, metas int, what string) {
		t.Helper()
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if len(h.states) != states || len(h.metas) != metas {
			t.Fatalf("%s: handed %d states and %d metadata maps, want %d and %d", what, len(h.states), len(h.metas), states, metas)
		}
	}
	hostsIdx, err := co.watchVars(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.watchNodes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pass(1, 1, "the first pass")
	pass(1, 1, "nothing moved")
	pass(1, 1, "nothing moved, again")

	rec, err := cl.store.Host(ctx, "client-2")
	if err != nil {
		t.Fatal(err)
	}
	rec.RebootRequired, rec.Reason, rec.RequestedAt = true, "test", time.Now()
	if _, err := cl.store.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := co.watchVars(ctx, hostsIdx); err != nil {
		t.Fatal(err)
	}
	// The record changed (new metadata) and the plan moved to pending, then
	// draining (its group had room: granted in the same pass, regrant.go): the
	// state after the decisions.
	pass(2, 2, "a record changed and its plan moved")
	last := h.states[len(h.states)-1]
	if p := planOf(last.Plans, "client-2"); p.Phase != store.PhaseDraining {
		t.Fatalf("handed plan of client-2 %+v, want draining", p)
	}
	if m := h.metas[len(h.metas)-1]; m[rec.NodeID].Phase != store.PhaseDraining || !m[rec.NodeID].RebootRequired {
		t.Fatalf("handed metadata of client-2 %+v, want draining and required", m[rec.NodeID])
	}
	if m := h.metas[len(h.metas)-1]; len(m) != 3 {
		t.Fatalf("metadata of %d nodes handed, want 3", len(m))
	}

	if _, err := cl.store.UpdateControl(ctx, func(c *store.Control) error {
		c.Paused, c.PauseReason, c.PausedAt = true, "test", time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := len(h.states)
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.states) == n || !h.states[len(h.states)-1].Pause.Paused {
		t.Fatalf("the pause was not handed to the notifier: %+v", h.states[n-1:])
	}
}

func planOf(plans []store.Plan, host string) store.Plan {
	for _, p := range plans {
		if p.Host == host {
			return p
		}
	}
	return store.Plan{}
}

// A rebooting host's node is left out of the metadata handed on: its client is
// going down, and the node keeps what it had (drained) until it is back.
func TestRebootingNodeMetaLeftOut(t *testing.T) {
	cl := newBenchCluster(t, 2)
	h := &handedOn{}
	co := New(Options{
		Deps: Deps{Nodes: cl.client.Nodes(), Store: cl.store, Notifier: h, NodeMeta: metaHanded{h}},
		Rules: rules.Rules{
			Groups: cl.groups,
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
	})
	ctx := t.Context()
	rec, err := cl.store.Host(ctx, "client-2")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old, _ := cl.store.Plan(ctx, "client-2") // none, or the bench cluster's idle one
	if _, err := cl.store.PutPlan(ctx, store.Plan{Host: "client-2", Phase: store.PhaseRebooting, PhaseSince: now, GrantID: "g1",
		BootIDAtGrant: rec.BootID, NodeID: rec.NodeID, Timeline: map[string]time.Time{store.PhaseRebooting: now},
		ModifyIndex: old.ModifyIndex}); err != nil {
		t.Fatal(err)
	}
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.metas) == 0 {
		t.Fatal("no metadata handed on")
	}
	m := h.metas[len(h.metas)-1]
	if got, ok := m[rec.NodeID]; ok {
		t.Errorf("metadata of the rebooting host's node handed on: %+v", got)
	}
	if len(m) != 1 {
		t.Errorf("metadata of %d nodes handed on, want the other node's", len(m))
	}
}

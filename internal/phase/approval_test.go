package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host's approval in its plan: since when it awaits (set once, cleared when
// it stops), who approved its grant, carried to the history and forgotten, the
// operator's approval consumed, when the cycle ends.
func TestApprovalInPlan(t *testing.T) {
	awaitingReason := WaitFor(WaitAwaitingApproval, "run `rollboot approve h1`")
	until := t0.Add(time.Hour)
	tests := []struct {
		name  string
		in    Input
		check func(t *testing.T, d Decision)
	}{
		{name: "begins to await: since now, stored", in: Input{Now: t0, Plan: plan(store.PhasePending, nil), Host: host("b1", true),
			Node: node(nil), NotAdmitted: awaitingReason},
			check: func(t *testing.T, d Decision) {
				if !d.Write || !d.Plan.AwaitingSince.Equal(t0) || d.Plan.WaitingKind != "awaiting_approval" || d.Event != "awaiting approval" {
					t.Errorf("write %v, plan %+v", d.Write, d.Plan)
				}
			}},
		{name: "still awaiting: no write", in: Input{Now: t0, Host: host("b1", true), Node: node(nil), NotAdmitted: awaitingReason,
			Plan: plan(store.PhasePending, func(p *store.Plan) {
				p.AwaitingSince, p.Waiting, p.WaitingKind = t0.Add(-time.Minute), awaitingReason.Stored(), "awaiting_approval"
			})},
			check: func(t *testing.T, d Decision) {
				if d.Write || !d.Plan.AwaitingSince.Equal(t0.Add(-time.Minute)) {
					t.Errorf("write %v, plan %+v", d.Write, d.Plan)
				}
			}},
		{name: "approved: granted with who approved, no longer awaiting", in: Input{Now: t0, Host: host("b1", true), Node: node(nil),
			Admitted: true, NewGrantID: "g2", ApprovedBy: "alice", ApprovalUntil: until,
			Plan: plan(store.PhasePending, func(p *store.Plan) {
				p.AwaitingSince, p.Waiting, p.WaitingKind = t0.Add(-time.Minute), awaitingReason.Stored(), "awaiting_approval"
			})},
			check: func(t *testing.T, d Decision) {
				if !d.StartDrain || d.Plan.ApprovedBy != "alice" || !d.Plan.ApprovalUntil.Equal(until) || !d.Plan.AwaitingSince.IsZero() {
					t.Errorf("plan %+v", d.Plan)
				}
			}},
		{name: "the cycle ends: history says who approved, the approval is consumed", in: Input{Now: t0, Timing: timing, Host: host("b2", false),
			Node: node(nil), Plan: plan(store.PhaseRejoining, func(p *store.Plan) { p.ApprovedBy, p.ApprovalUntil = "alice", until })},
			check: func(t *testing.T, d Decision) {
				if d.History == nil || d.History.ApprovedBy != "alice" {
					t.Fatalf("history %+v", d.History)
				}
				if !d.ClearApproval.Equal(until) || d.Plan.ApprovedBy != "" || !d.Plan.ApprovalUntil.IsZero() {
					t.Errorf("clear %v, plan %+v", d.ClearApproval, d.Plan)
				}
			}},
		{name: "an aborted drain backs off: the approval stays for the retry", in: Input{Now: t0, Timing: timing, Host: host("b1", true),
			Node: node(func(n *NodeView) { n.Draining = true; n.DrainGrant = "g1"; n.Eligible = false }),
			Plan: plan(store.PhaseDraining, func(p *store.Plan) {
				p.ApprovedBy, p.ApprovalUntil = "alice", until
				p.PhaseSince = t0.Add(-time.Hour)
			})},
			check: func(t *testing.T, d Decision) {
				if d.Plan.Phase != store.PhaseBackoff || d.Plan.ApprovedBy != "alice" || !d.ClearApproval.IsZero() {
					t.Errorf("clear %v, plan %+v", d.ClearApproval, d.Plan)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Step(tc.in)) })
	}
}

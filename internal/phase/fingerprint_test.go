package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// The grant records the fingerprint the host's record claims for its need, and
// the history record of the cycle carries it (the cycle's wave); the plan
// forgets it when the cycle ends.
func TestGrantRecordsFingerprint(t *testing.T) {
	rec := host("b1", true)
	rec.Fingerprint = "kernel 6.8.0-49"
	in := Input{Now: t0, Timing: timing, Plan: plan(store.PhasePending, func(p *store.Plan) { p.GrantID = "" }), Admitted: true,
		NewGrantID: "g9", Node: node(nil), Host: rec}
	d := Step(in)
	if !d.Plan.Active() || d.Plan.Fingerprint != "kernel 6.8.0-49" {
		t.Fatalf("grant: phase %s, fingerprint %q", d.Plan.Phase, d.Plan.Fingerprint)
	}
	released := Step(Input{Now: t0, Timing: timing, Plan: d.Plan, Node: node(func(n *NodeView) { n.Eligible, n.Draining = false, true }),
		Host: rec, ReleaseAt: t0})
	if released.History == nil || released.History.Fingerprint != "kernel 6.8.0-49" || released.Plan.Fingerprint != "" {
		t.Fatalf("release: history %+v, plan fingerprint %q", released.History, released.Plan.Fingerprint)
	}
	// A grant that answers a request, the record claiming no need: none.
	rec.RebootRequired = false
	in.Request = &store.Request{At: t0.Add(-2 * time.Hour), By: "ops"}
	if d := Step(in); !d.Plan.Active() || d.Plan.Fingerprint != "" {
		t.Errorf("a grant for a request: phase %s, fingerprint %q", d.Plan.Phase, d.Plan.Fingerprint)
	}
}

// A need that changed while the host waited (a newer update) is the one its
// grant records, for its history record; its place in line stays.
func TestGrantRecordsTheCurrentNeed(t *testing.T) {
	rec := host("b1", true)
	rec.Reason, rec.Fingerprint = "kernel 6.8.0-53 installed", "k53"
	p := plan(store.PhasePending, func(p *store.Plan) { p.GrantID, p.Reason = "", "kernel 6.8.0-52 installed" })
	d := Step(Input{Now: t0, Timing: timing, Plan: p, Admitted: true, NewGrantID: "g9", Node: node(nil), Host: rec})
	if !d.Plan.Active() || d.Plan.Reason != "kernel 6.8.0-53 installed" || !d.Plan.RequestedAt.Equal(p.RequestedAt) {
		t.Fatalf("grant: phase %s, reason %q, requested at %s (was %s)", d.Plan.Phase, d.Plan.Reason, d.Plan.RequestedAt, p.RequestedAt)
	}
}

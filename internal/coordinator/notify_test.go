package coordinator

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// The notifier tells a failed reboot from an aborted drain by the plan the phase
// machine stores: both go to backoff with their grant.
func TestNotifyKindOfBackoff(t *testing.T) {
	tests := []struct {
		name string
		in   phase.Input
		want notify.Kind
	}{
		{
			name: "the agent reports a failed hook",
			in:   phase.Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(drainedNode)},
			want: notify.RebootFailed,
		},
		{
			name: "someone canceled the drain",
			in: phase.Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true), Node: node(func(n *phase.NodeView) {
				n.Draining, n.DrainStatus, n.DrainGrant = false, "canceled", "g1"
			})},
			want: notify.DrainAborted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = t0
			d := phase.Step(tt.in)
			if d.Plan.Phase != store.PhaseBackoff {
				t.Fatalf("phase %s, want backoff", d.Plan.Phase)
			}
			evs := notify.Derive([]store.Plan{d.Plan}, notify.Pause{}, notify.Ledger{})
			if len(evs) != 1 || evs[0].Kind != tt.want || evs[0].Grant != d.Plan.GrantID || evs[0].Error == "" {
				t.Fatalf("events %+v, want one %s of grant %s with its error", evs, tt.want, d.Plan.GrantID)
			}
		})
	}
}

// The history of a cycle says who asked for it: the manual request's author when
// the request was the need, nobody (the host's agent) otherwise.
func TestHistoryRequestedBy(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  *store.Request
		want string
	}{
		{name: "the agent's detection", want: ""},
		{name: "a manual request", req: &store.Request{At: t0.Add(-time.Hour), By: "ops@bastion"}, want: "ops@bastion"},
		{name: "a request after the detection", req: &store.Request{At: t0.Add(-time.Minute), By: "ops@bastion"}, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := phase.Step(phase.Input{Now: t0, Timing: timing, Host: host("b2", false), Request: tt.req, Plan: plan(store.PhaseRejoining, nil),
				Node: node(nil)})
			if d.History == nil || d.History.RequestedBy != tt.want {
				t.Fatalf("history %+v, want requested by %q", d.History, tt.want)
			}
		})
	}
}

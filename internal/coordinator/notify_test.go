package coordinator

import (
	"testing"

	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// The notifier tells a failed reboot from an aborted drain by the plan the phase
// machine stores: both go to backoff with their grant.
func TestNotifyKindOfBackoff(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want notify.Kind
	}{
		{
			name: "the agent reports a failed hook",
			in:   Input{Plan: plan(store.PhaseRebooting, nil), Host: failedHost("b1", "g1"), Node: node(drainedNode)},
			want: notify.RebootFailed,
		},
		{
			name: "someone canceled the drain",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true), Node: node(func(n *NodeView) {
				n.Draining, n.DrainStatus, n.DrainGrant = false, "canceled", "g1"
			})},
			want: notify.DrainAborted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = t0
			d := Step(tt.in)
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

package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestCancelDone(t *testing.T) {
	at := t0.Add(-time.Minute)
	need := func(req time.Time) *store.HostRecord {
		h := host("b1", true)
		h.RequestedAt = req
		return h
	}
	tests := []struct {
		name string
		in   Input
		next store.Plan
		want bool
	}{
		{name: "no cancel", in: Input{Host: host("b1", false)}, next: plan(store.PhaseIdle, nil)},
		{name: "need still there: the cancel holds it", in: Input{CancelAt: at, Host: need(at.Add(-time.Hour))}, next: plan(store.PhaseIdle, nil)},
		{name: "need gone: done", in: Input{CancelAt: at, Host: host("b1", false)}, next: plan(store.PhaseIdle, nil), want: true},
		{name: "a later need is a new request: done", in: Input{CancelAt: at, Host: need(at.Add(time.Second))}, next: plan(store.PhasePending, nil)},
		{name: "later need, idle", in: Input{CancelAt: at, Host: need(at.Add(time.Second))}, next: plan(store.PhaseIdle, nil), want: true},
		{name: "old manual request left", in: Input{CancelAt: at, Host: host("b1", false), Request: &store.Request{At: at.Add(-time.Second)}}, next: plan(store.PhaseIdle, nil)},
		{name: "still undoing a drain", in: Input{CancelAt: at, Host: host("b1", false)}, next: plan(store.PhaseDraining, nil)},
		{name: "record unknown: keep", in: Input{CancelAt: at}, next: plan(store.PhaseIdle, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cancelDone(tt.in, tt.next); got != tt.want {
				t.Errorf("cancelDone = %v, want %v", got, tt.want)
			}
		})
	}
}

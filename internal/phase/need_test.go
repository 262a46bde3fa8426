package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A cancel suppresses the needs made at or before it, each on its own: a
// request made after it stands even while the agent still reports the need
// the cancel suppressed (rollboot cancel, then rollboot request).
func TestNeedAfterCancel(t *testing.T) {
	canceled := t0.Add(-30 * time.Minute)
	agentNeed := host("b1", true) // RequestedAt: an hour before t0
	tests := []struct {
		name    string
		host    *store.HostRecord
		request *store.Request
		want    bool
		reason  string
	}{
		{"the agent's need, canceled", agentNeed, nil, false, ""},
		{"a request before the cancel", host("b1", false), &store.Request{At: canceled.Add(-time.Minute)}, false, ""},
		{"a request after the cancel, the agent's need canceled", agentNeed, &store.Request{At: canceled.Add(time.Minute), Reason: "again"}, true, "manual request: again"},
		{"a request after the cancel", host("b1", false), &store.Request{At: canceled.Add(time.Minute)}, true, "manual request"},
		{"a new need of the agent after the cancel", func() *store.HostRecord {
			h := host("b1", true)
			h.RequestedAt = canceled.Add(time.Second)
			return h
		}(), nil, true, "sentinel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, reason, ok := Need(Input{Host: tt.host, Request: tt.request, CancelAt: canceled})
			if ok != tt.want || reason != tt.reason || ok && !at.After(canceled) {
				t.Fatalf("Need = %s %q %v, want %v %q after the cancel", at, reason, ok, tt.want, tt.reason)
			}
		})
	}
}

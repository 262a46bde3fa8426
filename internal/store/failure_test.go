package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// The agent's failure report, its hold reason and its job survive a round trip
// through Nomad Variables, and a history record keeps the failure.
func TestHostRecordFailureAndHoldRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  store.HostRecord
	}{
		{"no failure", store.HostRecord{Host: "web-1", BootID: "b1"}},
		{"hook failed", store.HostRecord{Host: "web-1", BootID: "b1", RebootingGrant: "g1", AgentJob: "default/rollboot",
			Failure: &store.RebootFailure{Grant: "g1", Step: store.StepPreHook, ExitStatus: 3, Message: "hook `check-disk`: disk full", At: at}}},
		{"exit status 0 kept", store.HostRecord{Host: "web-1", BootID: "b1",
			Failure: &store.RebootFailure{Grant: "g2", Step: store.StepReboot, ExitStatus: 0, Message: "the host did not go down", At: at}}},
		{"not started", store.HostRecord{Host: "web-1", BootID: "b1",
			Failure: &store.RebootFailure{Grant: "g2", Step: store.StepReboot, ExitStatus: -1, Message: "no such file", At: at}}},
		{"holding", store.HostRecord{Host: "web-1", BootID: "b1", RebootingGrant: "g3", HoldReason: "quorum gate: nomad: no leader"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, _ := newStore(t)
			ctx := context.Background()
			if _, err := st.PutHost(ctx, tt.rec); err != nil {
				t.Fatal(err)
			}
			got, err := st.Host(ctx, tt.rec.Host)
			if err != nil {
				t.Fatal(err)
			}
			got.ModifyIndex = 0
			if !reflect.DeepEqual(got, tt.rec) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tt.rec)
			}
		})
	}
	t.Run("history keeps the error", func(t *testing.T) {
		st, _, _ := newStore(t)
		ctx := context.Background()
		h := store.HistoryRecord{Host: "web-1", GrantID: "g1", Outcome: "failed", Error: "pre-reboot hook failed (exit status 3): disk full", Finished: at}
		if err := st.AppendHistory(ctx, h, 10); err != nil {
			t.Fatal(err)
		}
		got, err := st.History(ctx)
		if err != nil || len(got) != 1 || got[0].Error != h.Error || got[0].Outcome != "failed" {
			t.Fatalf("history = %+v, %v", got, err)
		}
	})
}

package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host that begins to await approval is notified once per time it begins,
// across ledgers stored and read back (a new leader), and the grant that
// follows is notified as usual.
func TestAwaitingApprovalNotified(t *testing.T) {
	since := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	awaiting := store.Plan{Host: "db-1", Group: "db", Phase: store.PhasePending, Reason: "kernel", AwaitingSince: since,
		Waiting: "awaiting approval: run `rollboot approve db-1`"}
	evs := Derive([]store.Plan{awaiting}, Pause{}, Ledger{})
	if len(evs) != 1 || evs[0].Kind != AwaitingApproval || evs[0].Error != "run `rollboot approve db-1`" || !evs[0].At.Equal(since) {
		t.Fatalf("events %+v", evs)
	}
	var l Ledger
	l.Mark(evs[0])
	l, _, err := DecodeLedger(l.Parts())
	if err != nil {
		t.Fatal(err)
	}
	if evs := Derive([]store.Plan{awaiting}, Pause{}, l); len(evs) != 0 {
		t.Errorf("sent again: %+v", evs)
	}
	again := awaiting
	again.AwaitingSince = since.Add(time.Hour)
	if evs := Derive([]store.Plan{again}, Pause{}, l); len(evs) != 1 || evs[0].Kind != AwaitingApproval {
		t.Errorf("a new wait not notified: %+v", evs)
	}
	granted := store.Plan{Host: "db-1", Group: "db", Phase: store.PhaseDraining, PhaseSince: since.Add(time.Minute), GrantID: "g1", NodeID: "n1"}
	if evs := Derive([]store.Plan{granted}, Pause{}, l); len(evs) != 1 || evs[0].Kind != DrainStarted {
		t.Errorf("the grant after it: %+v", evs)
	}
	m, err := CompileMessages(nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := m.Render(Derive([]store.Plan{awaiting}, Pause{}, Ledger{})[0])
	// Backquotes are neutralised by Render, as in every message (markup.go).
	if want := "rollboot: db-1 (group db) awaits approval to reboot (kernel): run "; err != nil || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "rollboot approve db-1") {
		t.Errorf("message %q (%v), want %q...", msg, err, want)
	}
}

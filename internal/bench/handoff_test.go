package bench

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The hand-off runs from the close's plan write (the first plan write of the
// host after its history record) to the next drain start of the group, as the
// emulator logged them.
func TestHandOffsFromEvents(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	write := func(ms int, path string) nomadsim.Event {
		return nomadsim.Event{Type: nomadsim.EventVarWrite, Time: at(ms), Details: map[string]string{"path": path}}
	}
	drain := func(ms int, host string) nomadsim.Event {
		return nomadsim.Event{Type: nomadsim.EventDrainStart, Time: at(ms), Host: host}
	}
	hist := []store.HistoryRecord{
		{Host: "a", GrantID: "g1", Outcome: "rebooted"},
		{Host: "b", GrantID: "g2", Outcome: "rebooted"},
		{Host: "c", GrantID: "g3", Outcome: "rebooted"},
	}
	groupOf := map[string]string{"a": "x", "b": "x", "c": "x"}
	events := []nomadsim.Event{
		drain(0, "a"),
		write(10, "rollboot/plan/a"),             // draining -> drained: not a close
		drain(20, "a"),                           // issued again: not a new drain
		write(100, "rollboot/history/0001-a-g1"), // a's cycle closes...
		write(130, "rollboot/plan/b"),            // (another host's plan)
		write(150, "rollboot/plan/a"),            // ...its slot is free here
		drain(190, "b"),                          // b takes it: 40 ms
		write(195, "rollboot/plan/a"),            // a later write of a's plan
		write(400, "rollboot/history/0002-b-g2"), // b closes
		write(420, "rollboot/plan/b"),            // free at 420
		drain(420, "c"),                          // same instant: 0
		write(900, "rollboot/history/0003-c-g3"), // c closes, nobody after it
		write(910, "rollboot/plan/c"),
	}
	got := handOffs(events, hist, "rollboot", groupOf, 1)
	want := []time.Duration{40 * time.Millisecond, 0}
	if len(got) != len(want) {
		t.Fatalf("hand-offs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hand-off %d = %s, want %s", i, got[i], want[i])
		}
	}
}

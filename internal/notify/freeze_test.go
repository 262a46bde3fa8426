package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A freeze is notified once when it starts and once when it ends, whichever
// leader sees it: the ledger keeps its last occurrence in the pause part.
func TestNotifierFreezes(t *testing.T) {
	rcv := &receiver{}
	url := serve(t, rcv, "/hook")
	st := &memLedger{}
	idle := []store.Plan{plan(store.PhaseIdle, "", nil)}
	start1 := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	yearEnd := Freeze{Name: "year-end", Groups: []string{"default", "web"}, Start: start1, End: start1.Add(48 * time.Hour)}

	n := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n)
	n.Observe(State{Plans: idle, At: start1.Add(-time.Minute)})
	waitFor(t, "the baseline", st.written)
	for range 3 {
		n.Observe(State{Plans: idle, Freezes: []Freeze{yearEnd}, At: start1})
	}
	waitFor(t, "frozen", func() bool { return len(rcv.messages()) == 1 })
	waitFor(t, "the ledger", func() bool { return strings.Contains(st.part(PausePart)["freezes"], `"year-end"`) })

	// A new leader: the same freeze is not sent again; its end is.
	n2 := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n2)
	n2.Observe(State{Plans: idle, Freezes: []Freeze{yearEnd}, At: start1.Add(time.Hour)})
	n2.Observe(State{Plans: idle, At: yearEnd.End})
	waitFor(t, "freeze_ended", func() bool { return len(rcv.messages()) == 2 })
	waitFor(t, "the ended freeze forgotten", func() bool { return !strings.Contains(st.part(PausePart)["freezes"], `"year-end"`) })

	// A third leader sees no freeze: nothing of it again; the pause is the
	// next message.
	n3 := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n3)
	n3.Observe(State{Plans: idle, At: yearEnd.End.Add(time.Minute)})
	n3.Observe(State{Plans: idle, Pause: Pause{Paused: true, At: yearEnd.End}, At: yearEnd.End.Add(time.Minute)})
	waitFor(t, "paused", func() bool { return len(rcv.messages()) == 3 })
	want := []string{
		"rollboot: freeze year-end in force until 2026-12-22 00:00 UTC: no drain starts in it (groups: default, web)",
		"rollboot: freeze year-end ended: drains may start again in its groups (default, web)",
		"rollboot: rollout paused",
	}
	if got := rcv.messages(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages\n%q\nwant\n%q", got, want)
	}
}

// freeze_ended comes at the freeze's end, or when the state no longer holds
// it before (the policy lost it), once per occurrence; a state that says
// nothing of the freezes (At zero) ends none.
func TestFreezesEnded(t *testing.T) {
	from := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	f := Freeze{Name: "year-end", Groups: []string{"web"}, Start: from, End: from.Add(48 * time.Hour)}
	var l Ledger
	for _, e := range freezeEvents([]Freeze{f}) {
		l.Mark(e)
	}
	next := f
	next.Start, next.End = from.AddDate(1, 0, 0), from.AddDate(1, 0, 2)
	tests := []struct {
		name   string
		fs     []Freeze
		at     time.Time
		wantAt time.Time // zero: no event
	}{
		{name: "still in force", fs: []Freeze{f}, at: from.Add(time.Hour)},
		{name: "state without freezes", at: time.Time{}},
		{name: "at its end", at: f.End, wantAt: f.End},
		{name: "lost before its end", at: from.Add(time.Hour), wantAt: from.Add(time.Hour)},
		{name: "next occurrence in force", fs: []Freeze{next}, at: next.Start.Add(time.Hour), wantAt: f.End},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := freezesEnded(tt.fs, tt.at, l)
			if tt.wantAt.IsZero() {
				if len(got) != 0 {
					t.Fatalf("freezesEnded = %+v, want none", got)
				}
				return
			}
			want := Event{Kind: FreezeEnded, Freeze: "year-end", Group: "web", At: tt.wantAt, Until: f.End}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("freezesEnded = %+v, want %+v", got, want)
			}
			sent := l
			sent.Freezes = map[string]FreezeSent{"year-end": l.Freezes["year-end"]}
			sent.Mark(got[0])
			if again := freezesEnded(tt.fs, tt.at, sent); len(again) != 0 {
				t.Errorf("after it was marked sent: %+v", again)
			}
		})
	}
}

// The ledger keeps the freezes across a read; one written before freezes were
// notified (no item "freezes") reads as none sent, and a malformed item is a
// problem, not a refusal.
func TestLedgerFreezes(t *testing.T) {
	from := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	frozen := Event{Kind: Frozen, Freeze: "year-end", Group: "web", At: from, Until: from.Add(48 * time.Hour)}
	var l Ledger
	if l.Sent(frozen) {
		t.Fatal("a freeze sent before it was marked")
	}
	l.Mark(frozen)
	decoded, problems, err := DecodeLedger(l.Parts())
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	if !decoded.Sent(frozen) {
		t.Error("frozen not sent after a read")
	}
	if later := (Event{Kind: Frozen, Freeze: "year-end", At: from.AddDate(1, 0, 0)}); decoded.Sent(later) {
		t.Error("next year's occurrence counts as sent")
	}
	ended := Event{Kind: FreezeEnded, Freeze: "year-end", At: frozen.Until, Until: frozen.Until}
	if decoded.Sent(ended) {
		t.Error("freeze_ended sent before it was marked")
	}
	decoded.Mark(ended)
	again, _, _ := DecodeLedger(decoded.Parts())
	if !again.Sent(ended) || !again.Sent(frozen) {
		t.Errorf("after a read: ended sent %v, frozen sent %v", again.Sent(ended), again.Sent(frozen))
	}

	older := map[string]map[string]string{PausePart: {"version": ledgerVersion, "pause": "0,"}}
	old, problems, err := DecodeLedger(older)
	if err != nil || len(problems) > 0 || len(old.Freezes) != 0 {
		t.Errorf("a ledger without freezes: %+v, %v, %v", old.Freezes, problems, err)
	}
	older[PausePart]["freezes"] = "{"
	if _, problems, err := DecodeLedger(older); err != nil || len(problems) != 1 || problems[0] != "freezes: malformed" {
		t.Errorf("a malformed freezes item: %v, %v", problems, err)
	}
}

// A conflict's merge keeps this coordinator's marks of freezes and halts on
// the ledger read again, and never takes a mark back.
func TestMergeFreezesAndHalts(t *testing.T) {
	from := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	frozen := Event{Kind: Frozen, Freeze: "year-end", Group: "web", At: from, Until: from.Add(48 * time.Hour)}
	ended := Event{Kind: FreezeEnded, Freeze: "year-end", At: frozen.Until, Until: frozen.Until}
	launch := Event{Kind: Frozen, Freeze: "launch", Group: "db", At: from, Until: from.Add(time.Hour)}
	halted := Event{Kind: Halted, Group: "web", At: from}
	earlier := Event{Kind: Halted, Group: "web", At: from.Add(-time.Hour)}

	var mine, theirs Ledger
	for _, e := range []Event{frozen, ended, halted} {
		mine.Mark(e)
	}
	for _, e := range []Event{launch, earlier} {
		theirs.Mark(e)
	}
	merge(&theirs, mine)
	for _, e := range []Event{frozen, ended, launch, halted, earlier} {
		if !theirs.Sent(e) {
			t.Errorf("after the merge %s of %q at %s is not sent", e.Kind, e.Freeze+e.Group, e.At)
		}
	}
	if got := theirs.Halts["web"]; !got.Equal(from) {
		t.Errorf("the halt of web notified at %s, want the later %s", got, from)
	}
}

package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// simStore is the store over the emulator, which refuses a variable whose
// items pass 64 KiB as Nomad does.
func simStore(t *testing.T) *store.Store {
	t.Helper()
	_, c := simtest.Start(t, nomadsim.Config{}, nil)
	return store.New(c.Variables(), "rollboot", "")
}

// countingStore counts the writes and deletions of the ledger's parts, and
// fails the writes of the parts in fail.
type countingStore struct {
	LedgerStore
	mu     sync.Mutex
	writes []string
	fail   map[string]error
}

func (c *countingStore) PutNotifyLedger(ctx context.Context, part string, items map[string]string, idx uint64) (uint64, error) {
	c.mu.Lock()
	err := c.fail[part]
	if err == nil {
		c.writes = append(c.writes, part)
	}
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.LedgerStore.PutNotifyLedger(ctx, part, items, idx)
}

func (c *countingStore) DeleteNotifyLedger(ctx context.Context, part string, idx uint64) error {
	c.mu.Lock()
	c.writes = append(c.writes, "delete "+part)
	c.mu.Unlock()
	return c.LedgerStore.DeleteNotifyLedger(ctx, part, idx)
}

// take returns the writes counted since the last take.
func (c *countingStore) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// fleet returns n idle plans whose hosts all rebooted once.
func fleet(n int) []store.Plan {
	plans := make([]store.Plan, n)
	for i := range plans {
		plans[i] = store.Plan{Host: fmt.Sprintf("web-%04d.dc1.example.com", i), Group: "web", Phase: store.PhaseIdle,
			LastCompleted: t0.Add(time.Duration(i) * time.Second),
			Timeline:      map[string]time.Time{store.PhaseDraining: t0.Add(-time.Minute)}}
	}
	return plans
}

// The ledger of 5,000 hosts, each with the events of a whole cycle, passes
// Nomad's 64 KiB nearly seven times over: one variable is refused, the shards are not;
// a new leader reads every shard back, and a pass where one host changed writes
// that host's shard and nothing else.
func TestLedgerOf5000Hosts(t *testing.T) {
	st := simStore(t)
	ctx := t.Context()
	plans := fleet(5000)
	var l Ledger
	for _, p := range plans {
		l.Mark(Event{Kind: DrainStarted, Host: p.Host, Grant: "0123456789abcdef"})
		l.Mark(Event{Kind: Rebooting, Host: p.Host, Grant: "0123456789abcdef"})
		l.Mark(Event{Kind: BackInService, Host: p.Host, At: p.LastCompleted})
	}
	size := 0
	for k, v := range legacyItems(l) {
		size += len(k) + len(v)
	}
	if size <= 4*store.MaxVariableSize {
		t.Fatalf("the ledger takes %d bytes: not past 4 x 64 KiB, the test shows nothing", size)
	}
	_, err := st.PutNotifyLedger(ctx, LegacyPart, legacyItems(l), 0)
	if err == nil || !strings.Contains(err.Error(), "64KiB") {
		t.Fatalf("one variable of %d bytes: %v, want Nomad's 64KiB refusal", size, err)
	}

	cs := &countingStore{LedgerStore: st}
	var s stored
	if s, err = readParts(ctx, cs); err != nil {
		t.Fatal(err)
	}
	n, err := writeParts(ctx, cs, l, &s)
	if err != nil {
		t.Fatalf("sharded: %v", err)
	}
	if n != LedgerShards+1 {
		t.Errorf("%d variables written, want every shard and the pause part (%d)", n, LedgerShards+1)
	}
	largest := 0
	for _, items := range l.Parts() {
		n := 0
		for k, v := range items {
			n += len(k) + len(v)
		}
		largest = max(largest, n)
	}
	t.Logf("5,000 hosts: %d bytes in one variable; %d shards, the largest %d bytes", size, LedgerShards, largest)
	back, problems, err := ReadLedger(ctx, st)
	if err != nil || len(problems) > 0 {
		t.Fatalf("read back: %v %v", err, problems)
	}
	if !reflect.DeepEqual(back.Parts(), l.Parts()) {
		t.Error("the ledger read back differs from the one written")
	}

	cs.take()
	l.Mark(Event{Kind: DrainStarted, Host: plans[42].Host, Grant: "fedcba9876543210"})
	if _, err := writeParts(ctx, cs, l, &s); err != nil {
		t.Fatal(err)
	}
	if got, want := cs.take(), []string{ShardOf(plans[42].Host)}; !reflect.DeepEqual(got, want) {
		t.Errorf("one host changed: wrote %v, want its shard %v", got, want)
	}
	if _, err := writeParts(ctx, cs, l, &s); err != nil {
		t.Fatal(err)
	}
	if got := cs.take(); len(got) != 0 {
		t.Errorf("nothing changed: wrote %v", got)
	}
}

// The notifier of a fleet of 5,000 hosts stores its baseline, sends a host's
// drain once with one shard write, and a new leader sends nothing again.
func TestNotifierOf5000Hosts(t *testing.T) {
	rcv := &receiver{}
	url := serve(t, rcv, "/hook")
	cs := &countingStore{LedgerStore: simStore(t)}
	reg := prometheus.NewRegistry()
	n := newNotifier(t, cs, []string{url}, nil, reg)
	start(t, n)
	plans := fleet(5000)
	n.Observe(State{Plans: plans})
	waitFor(t, "the baseline of 5,000 hosts", func() bool { _, _, err := ReadLedger(t.Context(), cs); return err == nil })
	if w := cs.take(); len(w) != LedgerShards+1 {
		t.Errorf("baseline: %d writes, want %d", len(w), LedgerShards+1)
	}

	next := append([]store.Plan(nil), plans...)
	next[7] = store.Plan{Host: plans[7].Host, Group: "web", Phase: store.PhaseDraining, PhaseSince: t0.Add(time.Hour),
		GrantID: "g-7", NodeID: "n7", Attempt: 1, LastCompleted: plans[7].LastCompleted}
	n.Observe(State{Plans: next})
	waitFor(t, "the drain sent", func() bool { return len(rcv.messages()) == 1 })
	waitFor(t, "the drain recorded", func() bool {
		l, _, err := ReadLedger(t.Context(), cs)
		return err == nil && l.Sent(Event{Kind: DrainStarted, Host: plans[7].Host, Grant: "g-7"})
	})
	if got, want := cs.take(), []string{ShardOf(plans[7].Host)}; !reflect.DeepEqual(got, want) {
		t.Errorf("one host's event: wrote %v, want its shard %v", got, want)
	}
	if f := testutil.ToFloat64(n.metrics.ledgerFailures.WithLabelValues("write")); f != 0 {
		t.Errorf("%v ledger write failures", f)
	}

	n2 := newNotifier(t, cs, []string{url}, nil, nil)
	start(t, n2)
	n2.Observe(State{Plans: next})
	time.Sleep(200 * time.Millisecond) // a duplicate would come now
	if got := rcv.messages(); len(got) != 1 || !strings.Contains(got[0], plans[7].Host) {
		t.Errorf("messages %q, want the one drain", got)
	}
}

// A ledger of version 1 is where an upgrade starts: what it records is not
// sent again, what it does not is sent, and the shards then hold it all and
// the single variable is gone.
func TestNotifierUpgradesTheLedger(t *testing.T) {
	rcv := &receiver{}
	url := serve(t, rcv, "/hook")
	st := simStore(t)
	ctx := t.Context()
	plans := fleet(3)
	rebooting := store.Plan{Host: "db-1", Group: "db", Phase: store.PhaseRebooting, PhaseSince: t0, GrantID: "g1", NodeID: "n1",
		Attempt: 1, Timeline: map[string]time.Time{store.PhaseDraining: t0.Add(-time.Minute)}}
	// The old leader sent the fleet's returns, db-1's drain and the pause.
	old := Baseline(plans, Pause{Paused: true, At: t0})
	old.Mark(Event{Kind: DrainStarted, Host: "db-1", Grant: "g1"})
	if _, err := st.PutNotifyLedger(ctx, LegacyPart, legacyItems(old), 0); err != nil {
		t.Fatal(err)
	}

	cs := &countingStore{LedgerStore: st}
	n := newNotifier(t, cs, []string{url}, nil, nil)
	start(t, n)
	state := State{Plans: append(plans, rebooting), Pause: Pause{Paused: true, At: t0}}
	n.Observe(state)
	waitFor(t, "db-1's reboot", func() bool { return len(rcv.messages()) == 1 })
	if got := rcv.messages()[0]; got != "rollboot: db-1 is rebooting" {
		t.Errorf("message %q, want db-1's reboot alone", got)
	}
	waitFor(t, "the single variable deleted, the shards recording every event", func() bool {
		if _, _, err := st.NotifyLedger(ctx, LegacyPart); !errors.Is(err, store.ErrNotFound) {
			return false
		}
		l, _, err := ReadLedger(ctx, st)
		return err == nil && len(Derive(state.Plans, state.Pause, l)) == 0
	})

	// A new leader on the shards alone sends nothing again.
	n2 := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n2)
	n2.Observe(state)
	time.Sleep(200 * time.Millisecond)
	if got := rcv.messages(); len(got) != 1 {
		t.Errorf("messages %q, want db-1's reboot alone", got)
	}
}

// The pause part is written after the shards: a baseline cut short leaves no
// ledger, and the next leader starts from a baseline again rather than from a
// ledger that records half the fleet.
func TestPausePartLast(t *testing.T) {
	st := &memLedger{}
	refused := errors.New("refused")
	cs := &countingStore{LedgerStore: st, fail: map[string]error{PausePart: refused}}
	l := Baseline(fleet(200), Pause{})
	var s stored
	if _, err := writeParts(t.Context(), cs, l, &s); !errors.Is(err, refused) {
		t.Fatalf("write: %v, want the pause part's error", err)
	}
	if w := cs.take(); len(w) == 0 || len(w) > LedgerShards {
		t.Errorf("wrote %v: want the shards", w)
	}
	if _, _, err := ReadLedger(t.Context(), st); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read: %v, want no ledger", err)
	}
	cs.fail = nil
	if _, err := writeParts(t.Context(), cs, l, &s); err != nil {
		t.Fatal(err)
	}
	if w := cs.take(); !reflect.DeepEqual(w, []string{PausePart}) {
		t.Errorf("second try wrote %v, want the pause part alone", w)
	}
	if _, _, err := ReadLedger(t.Context(), st); err != nil {
		t.Errorf("read: %v", err)
	}
}

// Another coordinator wrote a shard since this one read it: the write is a
// conflict, and the notifier reads the ledger again and puts its marks on it,
// keeping the other's.
func TestNotifierConflictMerges(t *testing.T) {
	rcv := &receiver{}
	st := &memLedger{}
	n := newNotifier(t, st, []string{serve(t, rcv, "/hook")}, nil, nil)
	start(t, n)
	baseline(t, n, st)

	// A host of h1's shard, marked by another leader since: it sent x's stuck.
	shard, x := ShardOf("h1"), ""
	for i := 0; x == ""; i++ {
		if name := fmt.Sprintf("x%d", i); ShardOf(name) == shard {
			x = name
		}
	}
	items := map[string]string{"version": ledgerVersion, "host/" + x: "gx,stuck,0"}
	if _, err := st.PutNotifyLedger(t.Context(), shard, items, 0); err != nil {
		t.Fatal(err)
	}
	n.Observe(State{Plans: []store.Plan{plan(store.PhaseDraining, "g1", nil), {Host: x, Phase: store.PhaseIdle}}})
	waitFor(t, "h1's drain", func() bool { return len(rcv.messages()) == 1 })
	waitFor(t, "h1's drain recorded with the other's marks", func() bool {
		p := st.part(shard)
		return p["host/h1"] == "g1,drain_started,0" && p["host/"+x] == "gx,stuck,0"
	})
}

// A ledger that cannot be written is counted and logged, and tried again.
func TestNotifierCountsLedgerFailures(t *testing.T) {
	cs := &countingStore{LedgerStore: &memLedger{}, fail: map[string]error{PausePart: errors.New("refused")}}
	var logs syncbuf.Buffer
	n := newNotifier(t, cs, nil, slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	start(t, n)
	n.Observe(State{Plans: fleet(3)})
	waitFor(t, "the failed write counted", func() bool {
		return testutil.ToFloat64(n.metrics.ledgerFailures.WithLabelValues("write")) >= 1
	})
	if !strings.Contains(logs.String(), "notification ledger not written: will try again") || !strings.Contains(logs.String(), "refused") {
		t.Errorf("log:\n%s", logs.String())
	}
	if f := testutil.ToFloat64(n.metrics.ledgerFailures.WithLabelValues("read")); f != 0 {
		t.Errorf("%v read failures", f)
	}
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// countingVars counts reads, to show the host cache reads only what changed.
type countingVars struct {
	*api.Variables
	reads atomic.Int64
	lists atomic.Int64
}

func (c *countingVars) Read(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error) {
	c.reads.Add(1)
	return c.Variables.Read(path, q)
}

func (c *countingVars) PrefixList(prefix string, q *api.QueryOptions) ([]*api.VariableMetadata, *api.QueryMeta, error) {
	c.lists.Add(1)
	return c.Variables.PrefixList(prefix, q)
}

func newStore(t *testing.T) (*store.Store, *countingVars, *api.Client) {
	t.Helper()
	_, c := simtest.Start(t, nomadsim.Config{}, nil)
	cv := &countingVars{Variables: c.Variables()}
	return store.New(cv, "rollboot", ""), cv, c
}

func TestHostRecordRoundTripAndCAS(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 123, time.UTC)
	rec := store.HostRecord{Host: "web-1.example.com", NodeID: "n1", Roles: []string{"nomad-server", "nomad-client"},
		BootID: "b1", RebootRequired: true, Reason: "sentinel", RequestedAt: at}
	idx, err := st.PutHost(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Host(ctx, "web-1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got.ModifyIndex != idx || !got.RequestedAt.Equal(at) || got.Reason != "sentinel" || len(got.Roles) != 2 {
		t.Errorf("round trip = %+v", got)
	}
	// Create-only on an existing record is a conflict, not an overwrite.
	if _, err := st.PutHost(ctx, rec); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second create: err = %v, want ErrConflict", err)
	}
	// An update with a stale index is a conflict.
	rec.ModifyIndex = idx
	if _, err := st.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutHost(ctx, rec); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale update: err = %v, want ErrConflict", err)
	}
	if _, err := st.Host(ctx, "absent"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("absent host: err = %v", err)
	}
}

// A list older than the records read after it (a watch's answer taken again
// by a pass before the watch answered the writes since) makes no read of a
// record the store already holds at a newer index than the list names: at 50 ms
// of Nomad latency and 5,000 hosts, such reads were 0.7 per rebooted host.
func TestHostsFromAnOlderListReadNothingAgain(t *testing.T) {
	st, cv, _ := newStore(t)
	ctx := t.Context()
	idx, err := st.PutHost(ctx, store.HostRecord{Host: "a", BootID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := st.HostList(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "a", BootID: "b1", RebootRequired: true, ModifyIndex: idx}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := cv.reads.Load()
		recs, _, err := st.HostsIn(ctx, old)
		if err != nil || len(recs) != 1 || !recs[0].RebootRequired {
			t.Fatalf("take %d: %+v, %v; want a's newer record", i, recs, err)
		}
		want := int64(0)
		if i == 0 {
			want = 1 // the record changed since the store last read it
		}
		if n := cv.reads.Load() - before; n != want {
			t.Errorf("take %d of the older list: %d reads, want %d", i, n, want)
		}
	}
}

func TestHostsReadsOnlyChangedRecords(t *testing.T) {
	st, cv, _ := newStore(t)
	ctx := context.Background()
	for _, h := range []string{"a", "b", "c"} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h, BootID: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	hosts, _, err := st.Hosts(ctx, 0, 0)
	if err != nil || len(hosts) != 3 {
		t.Fatalf("hosts = %v, err = %v", hosts, err)
	}
	before := cv.reads.Load()
	if _, _, err := st.Hosts(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n := cv.reads.Load() - before; n != 0 {
		t.Errorf("unchanged records read again: %d reads", n)
	}
	b, _ := st.Host(ctx, "b")
	b.BootID = "y"
	if _, err := st.PutHost(ctx, b); err != nil {
		t.Fatal(err)
	}
	before = cv.reads.Load()
	hosts, _, err = st.Hosts(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := cv.reads.Load() - before; n != 1 {
		t.Errorf("reads after one change = %d, want 1", n)
	}
	if hosts[1].BootID != "y" {
		t.Errorf("changed record not refreshed: %+v", hosts[1])
	}
	// A record deleted is gone from the next list; written again, it is read.
	if err := st.DeleteHost(ctx, hosts[2]); err != nil {
		t.Fatal(err)
	}
	if hosts, _, err = st.Hosts(ctx, 0, 0); err != nil || len(hosts) != 2 {
		t.Fatalf("after deleting c: hosts = %+v, err = %v", hosts, err)
	}
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "c", BootID: "z"}); err != nil {
		t.Fatal(err)
	}
	if hosts, _, err = st.Hosts(ctx, 0, 0); err != nil || len(hosts) != 3 || hosts[2].BootID != "z" {
		t.Fatalf("after writing c again: hosts = %+v, err = %v", hosts, err)
	}
}

func TestWatchPlanBlocksUntilChange(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	idx, err := st.PutPlan(ctx, store.Plan{Host: "h", Phase: store.PhasePending})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changes: the watch returns after its wait with the same index.
	start := time.Now()
	_, n, err := st.WatchPlan(ctx, "h", idx, 100*time.Millisecond)
	if err != nil || n != idx {
		t.Fatalf("idle watch: n=%d idx=%d err=%v", n, idx, err)
	}
	if time.Since(start) < 90*time.Millisecond {
		t.Error("the watch did not block")
	}
	done := make(chan store.Plan, 1)
	go func() {
		p, _, _ := st.WatchPlan(ctx, "h", idx, 5*time.Second)
		done <- p
	}()
	p, _ := st.Plan(ctx, "h")
	p.Phase = store.PhaseDraining
	if _, err := st.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got.Phase != store.PhaseDraining {
			t.Errorf("watch returned %s", got.Phase)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the watch did not wake on the change")
	}
}

func TestUpdateControlRetriesConflicts(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	calls := 0
	_, err := st.UpdateControl(ctx, func(c *store.Control) error {
		calls++
		if calls == 1 {
			// Another writer slips in between our read and our write, on the
			// same host's variable.
			if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
				c.Paused, c.PauseReason = true, "other"
				c.Releases = map[string]time.Time{"h": time.Now().UTC()}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if c.Requests == nil {
			c.Requests = map[string]store.Request{}
		}
		c.Requests["h"] = store.Request{At: time.Now().UTC()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("fn called %d times, want 2 (one conflict)", calls)
	}
	c, _ := st.Control(ctx)
	if !c.Paused || c.PauseReason != "other" || len(c.Requests) != 1 || len(c.Releases) != 1 {
		t.Errorf("control = %+v: one of the two writes was lost", c)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		rec := store.HistoryRecord{Host: "h", Outcome: "rebooted", Finished: base.Add(time.Duration(i) * time.Minute),
			Timeline: map[string]time.Time{store.PhaseDraining: base}}
		if err := st.AppendHistory(ctx, rec, 3); err != nil {
			t.Fatal(err)
		}
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || !h[0].Finished.Equal(base.Add(2*time.Minute)) || !h[2].Finished.Equal(base.Add(4*time.Minute)) {
		t.Errorf("history = %+v, want the 3 newest, oldest first", h)
	}
	if !h[0].Timeline[store.PhaseDraining].Equal(base) {
		t.Error("timeline lost")
	}
}

// TestHistoryPrunesWithoutListing: the history is listed once, then pruned from
// what the store knows; a record another writer stored, which it does not know,
// is pruned at the next list, and the newest keep records are never pruned.
func TestHistoryPrunesWithoutListing(t *testing.T) {
	st, cv, c := newStore(t)
	other := store.New(c.Variables(), "rollboot", "")
	ctx := context.Background()
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const keep, n = 5, 600
	appendAt := func(s *store.Store, i, keep int) {
		t.Helper()
		rec := store.HistoryRecord{Host: "h", Outcome: "rebooted", Finished: base.Add(time.Duration(i) * time.Minute)}
		if err := s.AppendHistory(ctx, rec, keep); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if i == 100 {
			appendAt(other, -1, 0) // unknown to st until it lists
		}
		appendAt(st, i, keep)
		h, err := st.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		newest := h[len(h)-1].Finished
		if !newest.Equal(base.Add(time.Duration(i) * time.Minute)) {
			t.Fatalf("after append %d the newest record is %s", i, newest)
		}
		if want := min(i+1, keep); len(h) < want || len(h) > keep+1 {
			t.Fatalf("after append %d: %d records, want %d (one more at most while a record stored elsewhere is unseen)", i, len(h), want)
		}
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != keep || !h[0].Finished.Equal(base.Add((n-keep)*time.Minute)) {
		t.Errorf("history = %d records from %s, want the %d newest", len(h), h[0].Finished, keep)
	}
	// n appends and n reads of the history (one list each): the appends
	// themselves listed only every few hundred.
	if lists := cv.lists.Load() - n; lists > 4 {
		t.Errorf("the appends listed the history %d times, want a few", lists)
	}
}

// Appends side by side on a store that must list its history (a new
// leader's first wave of closes) list it once between them, not once each,
// and keep the newest keep records.
func TestHistoryAppendsSideBySideListOnce(t *testing.T) {
	st, cv, _ := newStore(t)
	ctx := context.Background()
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const n, keep = 24, 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			rec := store.HistoryRecord{Host: fmt.Sprintf("h%02d", i), Outcome: "rebooted", Finished: base.Add(time.Duration(i) * time.Minute)}
			errs[i] = st.AppendHistory(ctx, rec, keep)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if lists := cv.lists.Load(); lists != 1 {
		t.Errorf("%d appends side by side listed the history %d times, want once", n, lists)
	}
	h, err := st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A record written while the list was under way may be unseen by it, and
	// stay until the next list (historyKnown): never one of the newest.
	if len(h) < keep || len(h) == n || !h[len(h)-keep].Finished.Equal(base.Add((n-keep)*time.Minute)) {
		t.Errorf("history = %d records, want the %d newest and the oldest pruned", len(h), keep)
	}
}

func TestCorruptRecordIsAClearError(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	v := &api.Variable{Path: "rollboot/plan/h", Items: map[string]string{"host": "h", "phase": "pending", "attempt": "two"}}
	if _, _, err := c.Variables().Create(v, nil); err != nil {
		t.Fatal(err)
	}
	_, err := st.Plan(ctx, "h")
	if err == nil || !strings.Contains(err.Error(), "rollboot/plan/h") || !strings.Contains(err.Error(), `"attempt"`) {
		t.Errorf("err = %v, want it to name the variable and the item", err)
	}
}

// An approval (rollboot approve) is stored in its host's control variable
// beside a request, read back whole, and removed alone.
func TestControlApprovals(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	until := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Approvals = map[string]store.Approval{"web.1": {Until: until, By: "alice"}}
		c.Requests = map[string]store.Request{"web.1": {At: until.Add(-time.Hour)}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := st.Control(ctx)
	if err != nil || len(c.Problems) > 0 {
		t.Fatal(err, c.Problems)
	}
	if a := c.Approvals["web.1"]; !a.Until.Equal(until) || a.By != "alice" || len(c.Requests) != 1 {
		t.Fatalf("control = %+v", c)
	}
	if !c.Approvals["web.1"].Valid(until.Add(-time.Second)) || c.Approvals["web.1"].Valid(until) {
		t.Error("an approval is valid before its expiry only")
	}
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		delete(c.Approvals, "web.1")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if c, _ = st.Control(ctx); len(c.Approvals) != 0 || len(c.Requests) != 1 {
		t.Errorf("after removing the approval: %+v", c)
	}
}

// TestWatchOfSomethingAbsent: Nomad answers a blocking query on a variable
// that does not exist, or a prefix no variable is under, at the writes of the
// variables near it (the emulator models go-immutable-radix's watch). The
// store's watch of an absent policy or halt state makes a few queries while
// plans are written beside them, not one per write, reports no change
// meanwhile, and reports the policy once it is stored.
func TestWatchOfSomethingAbsent(t *testing.T) {
	st, cv, c := newStore(t)
	other := store.New(c.Variables(), "rollboot", "") // the writer's requests are not counted
	ctx := t.Context()
	for _, h := range []string{"a", "b"} {
		if _, err := other.PutPlan(ctx, store.Plan{Host: h, Phase: store.PhaseIdle}); err != nil {
			t.Fatal(err)
		}
	}
	type watcher struct {
		name  string
		watch func(context.Context, uint64, time.Duration) (uint64, error)
		reads func() int64
	}
	watchers := []watcher{
		{"policy", st.WatchPolicy, cv.reads.Load},
		{"halts", st.WatchHalts, cv.reads.Load},
	}
	for _, w := range watchers {
		t.Run(w.name, func(t *testing.T) {
			idx, err := w.watch(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			writes := make(chan int)
			go func() { // a plan written every 20ms for 2s: 100 writes near the policy
				n := 0
				defer func() { writes <- n }()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if err := touchPlan(ctx, other, "a"); err != nil {
							t.Error(err)
							return
						}
						n++
					}
				}
			}()
			time.AfterFunc(2*time.Second, func() { close(stop) })
			before := w.reads()
			for start := time.Now(); time.Since(start) < 2*time.Second; {
				n, err := w.watch(ctx, idx, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if n != idx {
					t.Fatalf("the watch of an absent %s reported a change: %d after %d", w.name, n, idx)
				}
			}
			made, wrote := w.reads()-before, <-writes
			// Waits of 1s, then 2s: three or four queries, however many writes.
			if wrote < 50 || made > 4 {
				t.Fatalf("%d queries of the absent %s while %d plans were written beside it", made, w.name, wrote)
			}
		})
	}

	// Stored, the policy is reported by a watch blocked on its absence.
	idx, err := st.WatchPolicy(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := watchAside(t, st.WatchPolicy, idx)
	rec := store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 1, Source: "group \"all\" {\n  concurrency = 1\n}\n"}}
	put, err := other.PutPolicy(ctx, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != put {
			t.Fatalf("the watch reported %d, the policy was stored at %d", n, put)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stored policy was not reported")
	}
}

// TestWatchesThatKeepWhatTheyWatch: the watches of the control variable and of
// the requests' folder create what they watch when it is absent (the control
// variable unpaused, a marker in the folder), so that Nomad answers them only
// for their own writes: they sleep through writes of plans beside them, and
// answer a pause, or a host's request, as it is written. The marker is no
// host's request.
func TestWatchesThatKeepWhatTheyWatch(t *testing.T) {
	st, _, c := newStore(t)
	other := store.New(c.Variables(), "rollboot", "")
	ctx := t.Context()
	if _, err := other.PutPlan(ctx, store.Plan{Host: "a", Phase: store.PhaseIdle}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name  string
		watch func(context.Context, uint64, time.Duration) (uint64, error)
		write func() error
	}{
		{"control", st.WatchControl, func() error {
			_, err := other.UpdateControl(ctx, func(c *store.Control) error { c.Paused, c.PauseReason = true, "test"; return nil })
			return err
		}},
		{"requests", st.WatchRequests, func() error {
			_, err := other.UpdateControl(ctx, func(c *store.Control) error {
				c.Requests = map[string]store.Request{"a": {At: time.Now().UTC(), By: "test"}}
				return nil
			})
			return err
		}},
	} {
		t.Run(w.name, func(t *testing.T) {
			idx, err := w.watch(ctx, 0, 0) // absent: created
			if err != nil {
				t.Fatal(err)
			}
			if idx, err = w.watch(ctx, idx, time.Second); err != nil { // the creation's answer
				t.Fatal(err)
			}
			answered := watchAside(t, w.watch, idx)
			for range 20 {
				if err := touchPlan(ctx, other, "a"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond)
			select {
			case n := <-answered:
				t.Fatalf("the watch answered plan writes beside what it watches (%d after %d)", n, idx)
			default:
			}
			if err := w.write(); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-answered:
				if n <= idx {
					t.Fatalf("answered %d after %d", n, idx)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the watch did not answer its own write")
			}
		})
	}
	ctl, err := st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctl.Problems) > 0 || len(ctl.Requests) != 1 || !ctl.Paused {
		t.Fatalf("control read beside the marker: %+v", ctl)
	}
}

// watchAside runs one query of watch from idx (a wait of 10 s) beside the
// test, and gives its answer. It returns once the query was sent and had time
// to block: a list's index is the variables table's, so a query that reached
// Nomad only after a write beside it would answer at once, as Nomad's
// blockingRPC does, before it ever waited.
func watchAside(t *testing.T, watch func(context.Context, uint64, time.Duration) (uint64, error), idx uint64) <-chan uint64 {
	answered := make(chan uint64, 1)
	sent := make(chan struct{})
	var once sync.Once
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(sent) }) },
	})
	go func() {
		n, err := watch(ctx, idx, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		answered <- n
	}()
	select {
	case <-sent:
		time.Sleep(50 * time.Millisecond) // the emulator answers in process
	case n := <-answered:
		answered <- n
	}
	return answered
}

// touchPlan writes host's plan again, changed.
func touchPlan(ctx context.Context, st *store.Store, host string) error {
	p, err := st.Plan(ctx, host)
	if err != nil {
		return err
	}
	p.LastError = time.Now().String()
	_, err = st.PutPlan(ctx, p)
	return err
}

package silence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/store"
)

// fakeAM records the silences as Alertmanager would, and fails while down.
type fakeAM struct {
	mu    sync.Mutex
	down  bool
	next  int
	ends  map[string]time.Time
	calls []string
}

func (f *fakeAM) Create(_ context.Context, host string, ms []Matcher, now, endsAt time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "create "+host)
	if f.down {
		return "", errors.New("connection refused")
	}
	f.next++
	id := fmt.Sprintf("s%d", f.next)
	f.ends[id] = endsAt
	return id, nil
}

func (f *fakeAM) Extend(_ context.Context, id string, endsAt time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "extend "+id)
	if f.down {
		return "", errors.New("connection refused")
	}
	if _, ok := f.ends[id]; !ok {
		return "", errGone
	}
	f.ends[id] = endsAt
	return id, nil
}

func (f *fakeAM) End(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "end "+id)
	if f.down {
		return errors.New("connection refused")
	}
	delete(f.ends, id)
	return nil
}

// memStore is the silences variable in memory, with check-and-set; the next
// failPut writes fail.
type memStore struct {
	items   map[string]string
	index   uint64
	failPut int
}

func (m *memStore) Silences(context.Context) (map[string]string, uint64, error) {
	return maps.Clone(m.items), m.index, nil
}

func (m *memStore) PutSilences(_ context.Context, items map[string]string, idx uint64) (uint64, error) {
	if m.failPut > 0 {
		m.failPut--
		return 0, errors.New("Nomad unreachable")
	}
	if idx != m.index {
		return 0, store.ErrConflict
	}
	m.items, m.index = maps.Clone(items), m.index+1
	return m.index, nil
}

// A write that fails is counted and kept with the silence for status, never
// blocks anything, and is tried again after Retry; a keeper of another term
// (a new leader) carries on with the silence its predecessor stored.
func TestKeeperFailuresAndTakeOver(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	am := &fakeAM{ends: map[string]time.Time{}, down: true}
	st := &memStore{}
	reg := prometheus.NewRegistry()
	newKeeper := func(r *prometheus.Registry) *Keeper {
		return New(Options{Store: st, NewAPI: func(string, time.Duration) API { return am }, Registry: r, Now: clock, Retry: 15 * time.Second})
	}
	k := newKeeper(reg)
	rules := mustRules(t, `instance="{{.Host}}"`)
	state := func(phase string) State {
		return State{Plans: map[string]store.Plan{"a": {Host: "a", Phase: phase, PhaseSince: now}},
			Rules: func(string) Rules { return rules }, AlertmanagerURL: "http://am", Timeout: time.Second}
	}
	k.Observe(state(store.PhaseDraining))
	term := &keeperTerm{k: k}
	next, ok := term.step(context.Background())
	if !ok || !next.Equal(now.Add(15*time.Second)) {
		t.Fatalf("after a failed create: step again at %v (%v), want after Retry", next, ok)
	}
	if got := testutil.ToFloat64(k.failures.WithLabelValues("create")); got != 1 {
		t.Errorf("create failures counted %v, want 1", got)
	}
	kept, _ := Decode(st.items)
	if kept["a"].Err == "" || kept["a"].ID != "" {
		t.Errorf("stored after the failure: %+v", kept["a"])
	}
	// Before Retry, nothing is sent again.
	term.step(context.Background())
	if len(am.calls) != 1 {
		t.Errorf("calls before Retry: %v", am.calls)
	}
	am.down = false
	now = now.Add(16 * time.Second)
	term.step(context.Background())
	kept, _ = Decode(st.items)
	if kept["a"].ID != "s1" || kept["a"].Err != "" {
		t.Fatalf("stored after the retry: %+v (calls %v)", kept["a"], am.calls)
	}

	// A new leader's keeper extends the silence stored, and ends it when the
	// host is stuck.
	k2 := newKeeper(prometheus.NewRegistry())
	now = now.Add(20 * time.Minute)
	k2.Observe(state(store.PhaseRebooting))
	term2 := &keeperTerm{k: k2}
	term2.step(context.Background())
	if want := now.Add(30 * time.Minute); !am.ends["s1"].Equal(want) {
		t.Errorf("the new leader did not extend s1: ends %v, want %v (calls %v)", am.ends["s1"], want, am.calls)
	}
	k2.Observe(state(store.PhaseStuck))
	term2.step(context.Background())
	if _, ok := am.ends["s1"]; ok {
		t.Errorf("s1 not ended once the host is stuck (calls %v)", am.calls)
	}
	if kept, _ := Decode(st.items); len(kept) != 0 {
		t.Errorf("still kept: %+v", kept)
	}
}

// A silence written to Alertmanager whose ID the store failed to keep is
// stored at the next step, not created again.
func TestKeeperStoreFailureKeepsIDs(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	am := &fakeAM{ends: map[string]time.Time{}}
	st := &memStore{failPut: 1}
	k := New(Options{Store: st, NewAPI: func(string, time.Duration) API { return am }, Now: func() time.Time { return now }})
	rules := mustRules(t, `instance="{{.Host}}"`)
	k.Observe(State{Plans: map[string]store.Plan{"a": {Host: "a", Phase: store.PhaseDraining, PhaseSince: now}},
		Rules: func(string) Rules { return rules }, Timeout: time.Second})
	term := &keeperTerm{k: k}
	term.step(context.Background())
	if len(st.items) != 0 {
		t.Fatalf("stored despite the failure: %v", st.items)
	}
	term.step(context.Background())
	kept, _ := Decode(st.items)
	if kept["a"].ID != "s1" || len(am.ends) != 1 {
		t.Errorf("kept %+v, silences in Alertmanager %v (calls %v)", kept, am.ends, am.calls)
	}
}

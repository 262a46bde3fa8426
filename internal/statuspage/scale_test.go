package statuspage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/statuspage"
	"github.com/rollboot/rollboot/internal/store"
)

// bigState is a rollout of n hosts in 10 groups, each with a finished cycle in
// the history; the test changes one host's plan.
type bigState struct {
	mu      sync.Mutex
	index   uint64
	plans   map[string]store.Plan
	hist    []store.HistoryRecord
	changed chan struct{}
}

func newBigState(n int, start time.Time) *bigState {
	b := &bigState{index: 1, plans: map[string]store.Plan{}, changed: make(chan struct{})}
	for i := range n {
		host, group := fmt.Sprintf("host-%04d", i), fmt.Sprintf("group-%d", i%10)
		at := start.Add(time.Duration(i) * time.Second)
		tl := map[string]time.Time{store.PhasePending: at, store.PhaseDraining: at.Add(20 * time.Second),
			store.PhaseDrained: at.Add(60 * time.Second), store.PhaseRejoining: at.Add(120 * time.Second),
			store.PhaseIdle: at.Add(150 * time.Second)}
		b.hist = append(b.hist, store.HistoryRecord{Host: host, Group: group, Outcome: "rebooted", Timeline: tl, Finished: tl[store.PhaseIdle]})
		b.plans[host] = store.Plan{Host: host, Group: group, Phase: store.PhaseIdle, PhaseSince: tl[store.PhaseIdle]}
	}
	return b
}

func (b *bigState) set(p store.Plan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.plans[p.Host] = p
	b.index++
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *bigState) HostsChecked(context.Context, uint64, time.Duration) ([]store.HostRecord, []store.BadRecord, uint64, error) {
	return nil, nil, 0, nil
}

func (b *bigState) PlansChecked(context.Context) (map[string]store.Plan, []store.BadRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]store.Plan, len(b.plans))
	for k, v := range b.plans {
		out[k] = v
	}
	return out, nil, nil
}

func (b *bigState) Control(context.Context) (store.Control, error) { return store.Control{}, nil }

func (b *bigState) Policy(context.Context) (store.PolicyRecord, error) {
	return store.PolicyRecord{}, store.ErrNotFound
}

func (b *bigState) Enforcement(context.Context) (store.Enforcement, error) {
	return store.Enforcement{}, store.ErrNotFound
}
func (b *bigState) LeaderLockIndex(context.Context) (uint64, error) { return 0, store.ErrNotFound }

func (b *bigState) History(context.Context) ([]store.HistoryRecord, error) { return b.hist, nil }

func (b *bigState) Watch(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return statuspage.WatchIndex(ctx, &b.mu, &b.index, &b.changed, index, wait)
}

type noNodes struct{}

func (noNodes) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{}, nil
}

// mutationsJS counts, from now on, the DOM changes under the groups but for
// their time axes (a handful of labels per group, moved as time passes).
const mutationsJS = `window.__mutations = 0;
new MutationObserver((ms) => {
  for (const m of ms) {
    const e = m.target.nodeType === 1 ? m.target : m.target.parentElement;
    if (!e.closest(".axis")) window.__mutations++;
  }
})
  .observe(document.getElementById("groups"), {subtree: true, childList: true, attributes: true, characterData: true});`

// TestPageAtScale loads the page of a rollout of 1,000 hosts with a cycle each,
// then changes one host: the update must touch that host's row and the
// summaries, not every row (counted with a MutationObserver). The time
// the first render took is logged, as a figure, not checked.
func TestPageAtScale(t *testing.T) {
	exe := chromium(t)
	const n = 1000
	start := time.Now().Add(-time.Hour)
	st := newBigState(n, start)
	srv := statuspage.New(statuspage.Source{
		Status: status.Source{Store: st, Nodes: noNodes{}}, History: st.History, Watch: st.Watch, Process: "test",
	}, nil)
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); ts.CloseClientConnections(); ts.Close(); wg.Wait() })

	bctx := browser(t, ctx, exe)
	loadStart := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	rows := `document.querySelectorAll(".row").length`
	waitFor(t, time.Minute, func() bool {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[int](rows))
		return got == n
	})
	t.Logf("figure: %d hosts (%d bars) rendered %s after navigation", n, 4*n, time.Since(loadStart).Round(time.Millisecond))
	bars, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll(".row .bar").length`))
	if err != nil || bars != 4*n {
		t.Fatalf("%d bars on the page (err %v), want %d", bars, err, 4*n)
	}

	if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](mutationsJS)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st.set(store.Plan{Host: "host-0007", Group: "group-7", Phase: store.PhaseDraining, PhaseSince: now,
		Timeline: map[string]time.Time{store.PhasePending: now.Add(-time.Minute), store.PhaseDraining: now}})
	phase := `document.querySelector('.row[data-host="host-0007"] .phase').textContent`
	var got string
	waitFor(t, time.Minute, func() bool {
		got, _ = chromedp.Run(bctx, chromedp.Evaluate[string](phase))
		return got == store.PhaseDraining
	}, func() { t.Logf("phase of host-0007 on the page: %q", got) })
	muts, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.__mutations`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: one host changed among %d: %d DOM mutations", n, muts)
	if muts > 40 {
		t.Errorf("one host's change made %d DOM mutations: the update touches more than its row and group", muts)
	}
	open, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('.row[data-host="host-0007"] .bar.open').length`))
	if open != 1 {
		t.Errorf("host-0007 has %d open bars, want 1 (its drain under way)", open)
	}
}

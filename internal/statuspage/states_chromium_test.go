package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/statuspage"
	"github.com/rollboot/rollboot/internal/store"
)

// scenario is rollboot's state as the test sets it: plans, control state and
// what the leader recorded; every change wakes the page's watch.
type scenario struct {
	mu      sync.Mutex
	index   uint64
	plans   map[string]store.Plan
	ctl     store.Control
	enf     store.Enforcement
	lock    uint64
	changed chan struct{}
}

func (s *scenario) change(f func(s *scenario)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
	s.index++
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *scenario) HostsChecked(context.Context, uint64, time.Duration) ([]store.HostRecord, []store.BadRecord, uint64, error) {
	return nil, nil, 0, nil
}

func (s *scenario) PlansChecked(context.Context) (map[string]store.Plan, []store.BadRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]store.Plan{}
	for k, v := range s.plans {
		out[k] = v
	}
	return out, nil, nil
}

func (s *scenario) Control(context.Context) (store.Control, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctl, nil
}

func (s *scenario) Policy(context.Context) (store.PolicyRecord, error) {
	return store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 3}}, nil
}

func (s *scenario) Enforcement(context.Context) (store.Enforcement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enf, nil
}

func (s *scenario) LeaderLockIndex(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock, nil
}

func (s *scenario) Watch(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return statuspage.WatchIndex(ctx, &s.mu, &s.index, &s.changed, index, wait)
}

// longReason is a hold whose text is far longer than its cell.
const longReason = "no new drain starts while alerts fire: NodeFilesystemAlmostFull (instance web-1:9100, " +
	"mountpoint /var/lib/nomad), KubeletDown, HighRequestLatency (service checkout, p99 above 2s for 10 minutes), " +
	"and the Alertmanager silence that covered them expired at 09:30"

// pageJS reads what the page shows of the rollout's state.
const pageJS = `(() => {
  const q = (s) => document.querySelector(s);
  const rows = {};
  for (const r of document.querySelectorAll(".row")) {
    rows[r.dataset.host] = {cls: r.className, badge: r.querySelector(".state").textContent, phase: r.querySelector(".phase").textContent,
      group: r.closest("details.group").dataset.group, bg: getComputedStyle(r).backgroundColor};
  }
  return {
    rollout: q("#headline").dataset.rollout || "", headline: q("#headline").textContent,
    counts: [...document.querySelectorAll("#counts .count")].map((e) => e.textContent).join(","),
    heldBy: (q("#counts .heldby") || {}).textContent || "",
    header: q("header").textContent, groups: [...document.querySelectorAll("details.group")].map((g) => g.dataset.group + ": " + g.querySelector("summary").textContent),
    rows,
  };
})()`

type shownRow struct {
	Cls, Badge, Phase, Group, Bg string
}

type shown struct {
	Rollout, Headline, Counts, Header string
	HeldBy                            string
	Groups                            []string
	Rows                              map[string]shownRow
}

// TestPageStatesInChromium loads the page in headless Chromium and walks the
// rollout through the states that answer "why is nothing moving?": every host
// held (held rows look unlike queued ones, and are counted), a queued host
// (rolling), paused, frozen by a policy that cannot be used, and no leader.
// It checks the header's wording, that a group the policy no longer has is
// gone, and that a long reason shows whole on demand.
func TestPageStatesInChromium(t *testing.T) {
	exe := chromium(t)
	now := time.Now()
	pending := func(host, waiting, kind string) store.Plan {
		return store.Plan{Host: host, Group: "web", Phase: store.PhasePending, PhaseSince: now, RequestedAt: now,
			Waiting: waiting, WaitingKind: kind, Timeline: map[string]time.Time{store.PhasePending: now}}
	}
	sc := &scenario{index: 1, changed: make(chan struct{}), lock: 12, plans: map[string]store.Plan{
		"web-1": pending("web-1", longReason, "alerts"),
		"web-2": pending("web-2", "group web: outside its windows", "group_budget"),
		"db-1":  {Host: "db-1", Group: "olddb", Phase: store.PhaseIdle}, // its group was removed from the policy
	}, enf: store.Enforcement{Leader: "coord-1 (pid 7)", PolicyVersion: 3, LockIndex: 12, Slots: map[string]int{"web": 1, "default": 1}}}
	srv := statuspage.New(statuspage.Source{Status: status.Source{Store: sc, Nodes: noNodes{}}, Watch: sc.Watch, Process: "test"}, nil)
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); ts.CloseClientConnections(); ts.Close(); wg.Wait() })

	bctx := browser(t, ctx, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	s := waitShown(t, bctx, statuspage.RolloutHeld)
	if s.Headline != "Held: every host that needs a reboot waits on a hold (2 hosts); see why on each" || s.Counts != "2 held,1 idle" ||
		s.HeldBy != "held by: alerts 1, group_budget 1" {
		t.Errorf("every host held: headline %q, counts %q, %q", s.Headline, s.Counts, s.HeldBy)
	}
	if strings.Contains(s.Header, "leads this process leads") || strings.Contains(s.Header, "Rollout") {
		t.Errorf("header %q", s.Header)
	}
	for _, g := range s.Groups {
		if strings.HasPrefix(g, "olddb") || strings.Contains(g, "1 hosts") {
			t.Errorf("group %q: a removed group is shown, or one host is counted as \"1 hosts\"", g)
		}
	}
	if r := s.Rows["db-1"]; r.Group != statuspage.NoGroup {
		t.Errorf("db-1, idle in a removed group, is listed under %q", r.Group)
	}
	if r := s.Rows["web-1"]; r.Cls != "row s-held" || r.Badge != "held" {
		t.Errorf("web-1 held: %+v", r)
	}
	checkFullReason(t, bctx)

	sc.change(func(s *scenario) {
		p := pending("web-2", "", "")
		p.CordonedAt, p.CordonNode = now, "node-web-2" // next in line (node_meta.cordon_next)
		s.plans["web-2"] = p
	})
	s = waitShown(t, bctx, statuspage.RolloutRunning)
	cordoned, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('.row[data-host="web-2"] .why').textContent`))
	if err != nil || !strings.Contains(cordoned, "cordoned: node ineligible until its drain") {
		t.Errorf("web-2's reason %q (%v): want it to say its node is cordoned", cordoned, err)
	}
	held, queued := s.Rows["web-1"], s.Rows["web-2"]
	if queued.Cls != "row s-queued" || queued.Badge != "queued" || queued.Bg == held.Bg {
		t.Errorf("a queued row looks like a held one: queued %+v, held %+v", queued, held)
	}
	if s.Headline != "Rolling: 1 queued, 1 held" || s.Counts != "1 queued,1 held,1 idle" {
		t.Errorf("rolling: headline %q, counts %q", s.Headline, s.Counts)
	}

	// A host awaiting approval (a group's approval = "manual") is held, and
	// its phase says so, as `rollboot status` does.
	sc.change(func(s *scenario) {
		s.plans["web-2"] = pending("web-2", "awaiting approval: run `rollboot approve web-2`", "awaiting_approval")
	})
	s = waitShown(t, bctx, statuspage.RolloutHeld)
	if r := s.Rows["web-2"]; r.Cls != "row s-held" || r.Phase != "awaiting_approval" || !strings.Contains(s.HeldBy, "awaiting_approval 1") {
		t.Errorf("web-2 awaiting approval: %+v, %q", r, s.HeldBy)
	}
	if r := s.Rows["web-1"]; r.Phase != "pending" {
		t.Errorf("web-1 held by alerts shows phase %q", r.Phase)
	}

	sc.change(func(s *scenario) { s.ctl = store.Control{Paused: true, PauseReason: "change freeze"} })
	if s = waitShown(t, bctx, statuspage.RolloutPaused); !strings.HasPrefix(s.Headline, "Paused (change freeze)") {
		t.Errorf("paused: headline %q", s.Headline)
	}
	sc.change(func(s *scenario) { s.ctl = store.Control{}; s.enf.PolicyProblem = "group web: window: bad time" })
	if s = waitShown(t, bctx, statuspage.RolloutFrozen); !strings.HasPrefix(s.Headline, "Frozen:") {
		t.Errorf("frozen: headline %q", s.Headline)
	}
	sc.change(func(s *scenario) { s.enf.PolicyProblem = ""; s.lock = 13 }) // the leader lost the lock
	if s = waitShown(t, bctx, statuspage.RolloutNoLeader); !strings.HasPrefix(s.Headline, "No coordinator leads") {
		t.Errorf("no leader: headline %q", s.Headline)
	}
}

// waitShown waits until the page's headline shows the rollout state want and
// returns what the page shows.
func waitShown(t *testing.T, bctx context.Context, want string) shown {
	t.Helper()
	var s shown
	waitFor(t, time.Minute, func() bool {
		var err error
		s, err = chromedp.Run(bctx, chromedp.Evaluate[shown](pageJS))
		return err == nil && s.Rollout == want
	}, func() { t.Logf("the page shows %+v, want rollout %q", s, want) })
	return s
}

// checkFullReason clicks web-1's reason: its whole text shows, wrapped, not
// cut to one line.
func checkFullReason(t *testing.T, bctx context.Context) {
	t.Helper()
	why := `document.querySelector('.row[data-host="web-1"] .why')`
	oneLine, err := chromedp.Run(bctx, chromedp.Evaluate[int](why+`.querySelector("summary").offsetHeight`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](why+`.querySelector("summary").click()`)); err != nil {
		t.Fatal(err)
	}
	type full struct {
		Open          bool
		Text          string
		Height        int
		Scroll, Width int
	}
	f, err := chromedp.Run(bctx, chromedp.Evaluate[full](`(() => { const d = `+why+`; const e = d.querySelector(".full");
	  return {open: d.open, text: e.textContent, height: e.offsetHeight, scroll: e.scrollWidth, width: e.clientWidth}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Open || f.Text != longReason || f.Height <= oneLine || f.Scroll > f.Width {
		t.Errorf("web-1's reason on demand: %+v (one line is %dpx high)", f, oneLine)
	}
}

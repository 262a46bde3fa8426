package notify

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// memLedger is a LedgerStore in memory, with Nomad's check-and-set, that
// counts the writes.
type memLedger struct {
	mu     sync.Mutex
	items  map[string]map[string]string
	index  map[string]uint64
	last   uint64
	writes int
}

func (m *memLedger) NotifyLedger(_ context.Context, part string) (map[string]string, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items[part] == nil {
		return nil, 0, store.ErrNotFound
	}
	return m.items[part], m.index[part], nil
}

func (m *memLedger) PutNotifyLedger(_ context.Context, part string, items map[string]string, idx uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if idx != m.index[part] {
		return 0, store.ErrConflict
	}
	if m.items == nil {
		m.items, m.index = map[string]map[string]string{}, map[string]uint64{}
	}
	m.last++
	m.writes++
	m.items[part], m.index[part] = items, m.last
	return m.last, nil
}

func (m *memLedger) DeleteNotifyLedger(_ context.Context, part string, idx uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if idx != m.index[part] {
		return store.ErrConflict
	}
	delete(m.items, part)
	delete(m.index, part)
	return nil
}

// written reports whether the ledger exists (its pause part is written last).
func (m *memLedger) written() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[PausePart] != nil
}

// part returns a copy of a part's items.
func (m *memLedger) part(name string) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.items[name])
}

// receiver is a webhook that records the messages it gets.
type receiver struct {
	mu   sync.Mutex
	msgs []string
	// status to answer; block: hold each request until released.
	status int
	block  chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	if r.block != nil {
		<-r.block
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, string(b))
	status := r.status
	r.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
	}
}

func (r *receiver) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// serve starts a receiver and returns the generic:// URL of it (with path).
func serve(t *testing.T, r *receiver, path string) string {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	if r.block != nil {
		t.Cleanup(func() { close(r.block) }) // before Close: it waits for the handlers
	}
	return "generic://" + strings.TrimPrefix(srv.URL, "http://") + path + "?disabletls=yes"
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// baseline hands n an empty state and waits for the ledger it starts from.
func baseline(t *testing.T, n *Notifier, st *memLedger) {
	t.Helper()
	n.Observe(State{})
	waitFor(t, "the baseline", st.written)
}

func start(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
}

func newNotifier(t *testing.T, st LedgerStore, urls []string, log *slog.Logger, reg *prometheus.Registry) *Notifier {
	t.Helper()
	targets, err := NewTargets(urls)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := CompileMessages(nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Store: st, Targets: targets, Messages: msgs, Timeout: 2 * time.Second, Retries: 1, Log: log, Registry: reg})
}

// The first start records the state as it is (nothing old is sent); from then on
// each event is sent once, and a second notifier (a new leader) on the same
// ledger sends nothing again.
func TestNotifierOnce(t *testing.T) {
	rcv := &receiver{}
	url := serve(t, rcv, "/hook")
	st := &memLedger{}
	n := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n)

	n.Observe(State{Plans: []store.Plan{plan(store.PhaseDraining, "g1", nil)}})
	waitFor(t, "the baseline", st.written)
	for range 3 {
		n.Observe(State{Plans: []store.Plan{plan(store.PhaseRebooting, "g1", nil)}})
	}
	waitFor(t, "rebooting", func() bool { return len(rcv.messages()) == 1 })
	if got := rcv.messages()[0]; got != "rollboot: h1 is rebooting" {
		t.Errorf("message %q", got)
	}
	done := plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) })
	n.Observe(State{Plans: []store.Plan{done}, Pause: Pause{Paused: true, At: t0, Reason: "change freeze"}})
	waitFor(t, "back in service and paused", func() bool { return len(rcv.messages()) == 3 })
	waitFor(t, "the ledger", func() bool {
		return strings.HasSuffix(st.part(PausePart)["pause"], ",p")
	})

	// A new leader on the same ledger: nothing again, then the resume.
	n2 := newNotifier(t, st, []string{url}, nil, nil)
	start(t, n2)
	n2.Observe(State{Plans: []store.Plan{done}, Pause: Pause{Paused: true, At: t0}})
	n2.Observe(State{Plans: []store.Plan{done}})
	waitFor(t, "resumed", func() bool { return len(rcv.messages()) == 4 })
	want := []string{"rollboot: h1 is rebooting", "rollboot: h1 rebooted and is back in service after 59m0s",
		"rollboot: rollout paused: change freeze", "rollboot: rollout resumed"}
	time.Sleep(100 * time.Millisecond) // nothing more may come
	if got := rcv.messages(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages\n%q\nwant\n%q", got, want)
	}
}

// A target that never answers slows nothing: Observe returns at once, the send
// times out, is counted, and the other target gets every event.
func TestNotifierSlowTarget(t *testing.T) {
	slow := &receiver{block: make(chan struct{})}
	fast := &receiver{}
	reg := prometheus.NewRegistry()
	st := &memLedger{}
	n := newNotifier(t, st, []string{serve(t, slow, "/slow"), serve(t, fast, "/fast")}, nil, reg)
	start(t, n)
	baseline(t, n, st)
	t0 := time.Now()
	for _, p := range []store.Plan{plan(store.PhaseDraining, "g1", nil), plan(store.PhaseRebooting, "g1", nil), plan(store.PhaseStuck, "g1", nil)} {
		n.Observe(State{Plans: []store.Plan{p}})
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Observe took %s", d)
	}
	waitFor(t, "every event at the fast target", func() bool { return len(fast.messages()) == 3 })
	waitFor(t, "the slow target's failures counted", func() bool {
		return testutil.ToFloat64(n.metrics.failures.WithLabelValues(string(DrainStarted), "generic")) == 1
	})
}

// A URL's credentials never show in logs: the target is named by its scheme and
// position, and the error of a failed send is redacted.
func TestNotifierRedacts(t *testing.T) {
	rcv := &receiver{status: http.StatusInternalServerError}
	url := serve(t, rcv, "/hooks/T0KEN-s3cr3t")
	url = strings.Replace(url, "generic://", "generic://alice:pa55word@", 1) + "&token=qu3rys3cr3t"
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st := &memLedger{}
	n := newNotifier(t, st, []string{url}, log, nil)
	start(t, n)
	baseline(t, n, st)
	n.Observe(State{Plans: []store.Plan{plan(store.PhaseDraining, "g1", nil)}})
	waitFor(t, "the failure logged", func() bool { return strings.Contains(logs.String(), "notification failed") })
	for _, secret := range []string{"T0KEN-s3cr3t", "pa55word", "alice", "qu3rys3cr3t"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs show %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "generic #1") || !strings.Contains(logs.String(), "500") {
		t.Errorf("logs do not say which target failed and how:\n%s", logs.String())
	}
	if err := CheckURL("generic://alice:pa55word@[::1"); err == nil || strings.Contains(err.Error(), "pa55word") {
		t.Errorf("CheckURL: %v", err)
	}
	if err := CheckURL("nosuchservice://alice:pa55word@host/x"); err == nil || strings.Contains(err.Error(), "pa55word") {
		t.Errorf("CheckURL: %v", err)
	}
}

// Every state observed counts, not only the newest: a host that went through
// rebooting and came back between two looks of the notifier gets both events,
// in order.
func TestNotifierKeepsPassingStates(t *testing.T) {
	rcv := &receiver{}
	st := &memLedger{}
	draining := plan(store.PhaseDraining, "g1", nil)
	for name, items := range Baseline([]store.Plan{draining}, Pause{}).Parts() {
		if _, err := st.PutNotifyLedger(t.Context(), name, items, 0); err != nil {
			t.Fatal(err)
		}
	}
	n := newNotifier(t, st, []string{serve(t, rcv, "/hook")}, nil, nil)
	n.Observe(State{Plans: []store.Plan{draining}})
	n.Observe(State{Plans: []store.Plan{plan(store.PhaseRejoining, "g1", nil)}})
	n.Observe(State{Plans: []store.Plan{plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) })}})
	start(t, n)
	waitFor(t, "two messages", func() bool { return len(rcv.messages()) == 2 })
	if got := strings.Join(rcv.messages(), "|"); got != "rollboot: h1 is rebooting|rollboot: h1 rebooted and is back in service after 59m0s" {
		t.Errorf("messages %q", got)
	}
}

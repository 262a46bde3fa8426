package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

// fakeState is rollboot's state, changed by the test; Watch blocks until it changes.
type fakeState struct {
	mu      sync.Mutex
	index   uint64
	plans   map[string]store.Plan
	changed chan struct{}
	fail    error // of every read, while set
	reads   int   // of the plans: one per page read
}

func newFakeState() *fakeState {
	return &fakeState{index: 1, plans: map[string]store.Plan{}, changed: make(chan struct{})}
}

func (f *fakeState) setPhase(host, phase string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[host] = store.Plan{Host: host, Group: "web", Phase: phase, Timeline: map[string]time.Time{store.PhasePending: time.Unix(100, 0)}}
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeState) HostsChecked(context.Context, uint64, time.Duration) ([]store.HostRecord, []store.BadRecord, uint64, error) {
	return nil, nil, 0, nil
}

func (f *fakeState) PlansChecked(context.Context) (map[string]store.Plan, []store.BadRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail != nil {
		return nil, nil, f.fail
	}
	out := map[string]store.Plan{}
	for k, v := range f.plans {
		out[k] = v
	}
	return out, nil, nil
}

func (f *fakeState) Control(context.Context) (store.Control, error) { return store.Control{}, nil }

func (f *fakeState) Policy(context.Context) (store.PolicyRecord, error) {
	return store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 4}}, nil
}

func (f *fakeState) Enforcement(context.Context) (store.Enforcement, error) {
	return store.Enforcement{Leader: "coord-1 (pid 7)", PolicyVersion: 4, LockIndex: 12}, nil
}

func (f *fakeState) LeaderLockIndex(context.Context) (uint64, error) { return 12, nil }

func (f *fakeState) watch(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return WatchIndex(ctx, &f.mu, &f.index, &f.changed, index, wait)
}

type noNodes struct{}

func (noNodes) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return nil, &api.QueryMeta{}, nil
}

func testServer(t *testing.T) (*fakeState, string) {
	return testServerWith(t, newFakeState())
}

func testServerWith(t *testing.T, st *fakeState) (*fakeState, string) {
	t.Helper()
	_, url := testServerOf(t, st, func(*Server) {})
	return st, url
}

// testServerOf serves a page of st, set up by configure before it is served.
func testServerOf(t *testing.T, st *fakeState, configure func(*Server)) (*Server, string) {
	t.Helper()
	srv := New(Source{
		Status:  status.Source{Store: st, Nodes: noNodes{}},
		History: func(context.Context) ([]store.HistoryRecord, error) { return nil, nil },
		Watch:   st.watch,
		Process: "test",
		Resync:  2 * time.Second, // a failed read is retried then; changes come through Watch
	}, nil)
	configure(srv)
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); ts.CloseClientConnections(); ts.Close(); wg.Wait() })
	return srv, ts.URL
}

// TestReadOnly: every route answers GET and refuses every other method.
func TestReadOnly(t *testing.T) {
	_, url := testServer(t)
	for _, path := range []string{PathPage, "/app.js", PathJSON, PathEvents} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(method, url+path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d (Allow %q), want 405 (GET, HEAD)", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	page, err := http.Get(url + PathPage)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if csp := page.Header.Get("Content-Security-Policy"); page.StatusCode != http.StatusOK || !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("GET %s: %d, Content-Security-Policy %q", PathPage, page.StatusCode, csp)
	}
	resp, err := http.Get(url + PathJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", PathJSON, resp.StatusCode, err)
	}
	if p.Process != "test" || p.Leader != LeaderUnknown || p.Coordinator != "coord-1 (pid 7)" || p.Policy != "version 4 enforced" {
		t.Errorf("page: process %q leader %q coordinator %q policy %q", p.Process, p.Leader, p.Coordinator, p.Policy)
	}
}

// TestAssetsSelfContained: the page loads nothing from elsewhere.
func TestAssetsSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|<iframe`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to %q: the page must embed everything it uses", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEvents: a listener gets the page at once, then each change.
func TestEvents(t *testing.T) {
	st, url := testServer(t)
	st.setPhase("a", store.PhasePending)
	next := listen(t, url)
	next(func(p Page) bool { return len(p.Status.Hosts) == 1 && p.Status.Hosts[0].Phase == store.PhasePending })
	st.setPhase("a", store.PhaseDraining)
	next(func(p Page) bool { return len(p.Status.Hosts) == 1 && p.Status.Hosts[0].Phase == store.PhaseDraining })
	st.setPhase("a", store.PhaseRebooting)
	next(func(p Page) bool { return len(p.Status.Hosts) == 1 && p.Status.Hosts[0].Phase == store.PhaseRebooting })
}

// TestEventsReadError: a state that cannot be read is an event with the error
// (and lists the page can iterate), and the page comes once it can be read.
func TestEventsReadError(t *testing.T) {
	st := newFakeState()
	st.fail = errors.New("permission denied")
	st, url := testServerWith(t, st)
	next := listen(t, url)
	next(func(p Page) bool {
		return strings.Contains(p.Error, "permission denied") && p.Groups != nil && p.Timeline != nil && p.Status.Hosts != nil
	})
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	st.setPhase("a", store.PhasePending)
	next(func(p Page) bool { return p.Error == "" && len(p.Status.Hosts) == 1 })
}

// listen opens the event stream; the function it returns waits for an event
// that satisfies ok.
func listen(t *testing.T, url string) func(ok func(Page) bool) {
	t.Helper()
	resp, err := http.Get(url + PathEvents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan Page)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "" {
				continue
			}
			var p Page
			if err := json.Unmarshal([]byte(data), &p); err != nil {
				t.Errorf("event: %v", err)
				return
			}
			events <- p
		}
	}()
	return func(ok func(Page) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case p, open := <-events:
				if !open {
					t.Fatal("stream ended")
				}
				if ok(p) {
					return
				}
			case <-deadline:
				t.Fatal("no such event within 30s")
			}
		}
	}
}

// Many requests of the JSON route at once share reads: the page is read at most
// once per minGap (and once more for the first), not once per request.
func TestJSONReadsShared(t *testing.T) {
	st, url := testServer(t)
	st.setPhase("a", store.PhasePending)
	time.Sleep(minGap) // the live updates' first read is not counted below
	st.mu.Lock()
	before := st.reads
	st.mu.Unlock()
	start := time.Now()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(url + PathJSON)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var p Page
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || len(p.Groups) != 1 {
				errs <- fmt.Errorf("page groups %+v: %v", p.Groups, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st.mu.Lock()
	reads := st.reads - before
	st.mu.Unlock()
	if limit := 2 + int(time.Since(start)/minGap); reads > limit {
		t.Errorf("%d requests read the page %d times, want at most %d", n, reads, limit)
	}
}

// WatchIndex is a fake state's blocking query on the index cur that mu
// guards: at once when cur has moved past index (or index is 0), else after
// the next change (changed is closed), ctx's end or wait. Exported to the
// package's external tests (their fakes share it).
func WatchIndex(ctx context.Context, mu *sync.Mutex, cur *uint64, changed *chan struct{}, index uint64, wait time.Duration) (uint64, error) {
	mu.Lock()
	idx, ch := *cur, *changed
	mu.Unlock()
	if index == 0 || idx > index {
		return idx, nil
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return index, ctx.Err()
	case <-time.After(wait):
	}
	mu.Lock()
	defer mu.Unlock()
	return *cur, nil
}

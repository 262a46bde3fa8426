package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"go.uber.org/goleak"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// memVars is an in-memory store.Variables. A blocking read of a variable blocks
// until the variable changes or its context ends, and then, when linger is set,
// stays in flight that much longer, as a request on a slow network does; a read
// of a missing variable answers at once (nothing to block on). readErr, when set,
// fails every read.
type memVars struct {
	linger   time.Duration
	reads    atomic.Int32  // reads started
	inFlight atomic.Int32  // blocking reads still running
	blocked  chan struct{} // if set, told of each blocking read that starts

	mu      sync.Mutex
	vars    map[string]api.Variable
	index   uint64
	changed chan struct{} // closed and replaced on every write
	readErr error
}

func newMemVars() *memVars {
	return &memVars{vars: map[string]api.Variable{}, index: 1, changed: make(chan struct{})}
}

func (v *memVars) Read(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error) {
	v.reads.Add(1)
	v.mu.Lock()
	got, ok := v.vars[path]
	changed, idx, readErr := v.changed, v.index, v.readErr
	v.mu.Unlock()
	switch {
	case readErr != nil:
		return nil, nil, readErr
	case !ok:
		return nil, &api.QueryMeta{LastIndex: idx}, api.ErrVariablePathNotFound
	case q.WaitIndex == 0 || got.ModifyIndex > q.WaitIndex:
		return &got, &api.QueryMeta{LastIndex: got.ModifyIndex}, nil
	}
	v.inFlight.Add(1)
	defer v.inFlight.Add(-1)
	if v.blocked != nil {
		v.blocked <- struct{}{}
	}
	select {
	case <-changed:
	case <-q.Context().Done():
	}
	time.Sleep(v.linger)
	if err := q.Context().Err(); err != nil {
		return nil, nil, err
	}
	return v.Read(path, &api.QueryOptions{})
}

func (v *memVars) PrefixList(string, *api.QueryOptions) ([]*api.VariableMetadata, *api.QueryMeta, error) {
	return nil, nil, errors.New("not used by the agent")
}

func (v *memVars) CheckedCreate(nv *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return v.write(nv)
}

func (v *memVars) CheckedUpdate(nv *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return v.write(nv)
}

func (v *memVars) CheckedDelete(string, uint64, *api.WriteOptions) (*api.WriteMeta, error) {
	return nil, errors.New("not used by the agent")
}

// write stores nv with CAS on its ModifyIndex.
func (v *memVars) write(nv *api.Variable) (*api.Variable, *api.WriteMeta, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur := v.vars[nv.Path]; cur.ModifyIndex != nv.ModifyIndex {
		return nil, nil, api.ErrCASConflict{CheckIndex: nv.ModifyIndex, Conflict: &cur}
	}
	v.index++
	out := *nv
	out.ModifyIndex = v.index
	v.vars[nv.Path] = out
	close(v.changed)
	v.changed = make(chan struct{})
	return &out, nil, nil
}

func (v *memVars) failReads(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.readErr = err
}

// fakeLocal is the local Nomad agent of host h1, a client whose node is node-1.
type fakeLocal struct{}

func (fakeLocal) Health() (*api.AgentHealthResponse, error) {
	return &api.AgentHealthResponse{Client: &api.AgentHealth{Ok: true, Message: "ok"}}, nil
}

func (fakeLocal) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return []*api.NodeListStub{{ID: "node-1", Name: "h1", Status: api.NodeStatusReady}}, &api.QueryMeta{}, nil
}

// Run owns the goroutines it starts: when it returns, its watches of the plan
// and of its own record have returned too, even when their blocking queries take
// a while to give up. Started and stopped several times, it leaves nothing behind.
func TestRunWaitsForItsWatches(t *testing.T) {
	defer goleak.VerifyNone(t)
	bootFile := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(bootFile, []byte("boot-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := newMemVars()
	vars.linger, vars.blocked = 100*time.Millisecond, make(chan struct{}, 8)
	st := store.New(vars, "rollboot", "")
	if _, err := st.PutPlan(context.Background(), store.Plan{Host: "h1", Phase: store.PhaseIdle}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a := New(Options{Host: "h1", Store: st, Local: fakeLocal{}, NodeList: fakeLocal{}, BootIDFile: bootFile,
			Rebooter: &countingRebooter{}, PollEvery: time.Hour})
		stop, _ := run(t, a)
		for range 2 { // the plan's watch and the record's, both blocked
			select {
			case <-vars.blocked:
			case <-time.After(10 * time.Second):
				t.Fatalf("run %d: the watches did not block", i)
			}
		}
		stop()
		if n := vars.inFlight.Load(); n != 0 {
			t.Fatalf("run %d: Run returned with %d blocking queries still in flight", i, n)
		}
	}
}

// watchPlanFor runs a's watch of its plan until the test ends, and waits for it.
func watchPlanFor(t *testing.T, a *Agent) <-chan store.Plan {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	plans := make(chan store.Plan, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.watchPlan(ctx, plans, "")
	}()
	t.Cleanup(func() { cancel(); <-done })
	return plans
}

func nextPlan(t *testing.T, plans <-chan store.Plan) store.Plan {
	t.Helper()
	select {
	case p := <-plans:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no plan offered")
		return store.Plan{}
	}
}

// A plan not written yet is looked for again until it appears; then each new
// version is offered, and an unchanged one is not offered again.
func TestWatchPlanFollowsThePlan(t *testing.T) {
	vars := newMemVars()
	st := store.New(vars, "rollboot", "")
	plans := watchPlanFor(t, New(Options{Host: "h1", Store: st, PollEvery: 5 * time.Millisecond}))
	deadline := time.Now().Add(10 * time.Second)
	for vars.reads.Load() < 3 { // looked for, and looked for again
		if time.Now().After(deadline) {
			t.Fatal("the missing plan was not looked for again")
		}
		time.Sleep(5 * time.Millisecond) // counting reads: no condition to block on
	}
	ctx := context.Background()
	idx, err := st.PutPlan(ctx, store.Plan{Host: "h1", Phase: store.PhasePending})
	if err != nil {
		t.Fatal(err)
	}
	if p := nextPlan(t, plans); p.Phase != store.PhasePending {
		t.Fatalf("first plan %+v", p)
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: "h1", Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", ModifyIndex: idx}); err != nil {
		t.Fatal(err)
	}
	if p := nextPlan(t, plans); p.GrantID != "g1" {
		t.Fatalf("second plan %+v", p)
	}
	select {
	case p := <-plans:
		t.Fatalf("an unchanged plan was offered again: %+v", p)
	case <-time.After(100 * time.Millisecond):
	}
}

// A refused token is logged as an error and retried slowly; once reads work
// again the plan is offered.
func TestWatchPlanDeniedIsLoggedAndRetried(t *testing.T) {
	vars := newMemVars()
	vars.failReads(errors.New("Unexpected response code: 403 (Permission denied)"))
	log := &syncbuf.Buffer{}
	a := New(Options{Host: "h1", Store: store.New(vars, "rollboot", ""), PollEvery: 5 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	watchPlanFor(t, a)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), `msg="permission denied`) || !strings.Contains(log.String(), `op="watch plan"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond) // polling a log: no condition to block on
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "retry_in=30s") {
		t.Errorf("log:\n%s", log.String())
	}
}

// The watch of the host record treats a refused token as the plan's watch does:
// an error in the log and a slow retry, not a silent retry every few seconds.
func TestWatchRecordDeniedIsLoggedAndRetried(t *testing.T) {
	vars := newMemVars()
	vars.failReads(errors.New("Unexpected response code: 403 (Permission denied)"))
	log := &syncbuf.Buffer{}
	a := New(Options{Host: "h1", Store: store.New(vars, "rollboot", ""), PollEvery: 5 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.watchRecord(ctx, make(chan recordChange, 1), 0)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), `msg="permission denied`) || !strings.Contains(log.String(), `op="watch host record"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond) // polling a log: no condition to block on
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "retry_in=30s") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestWatchRetry(t *testing.T) {
	denied := errors.New("Unexpected response code: 403 (Permission denied)")
	down := errors.New("connection refused")
	tests := []struct {
		name  string
		err   error
		fails int
		want  time.Duration
	}{
		{name: "a transient error is retried soon", err: down, fails: 1, want: 200 * time.Millisecond},
		{name: "and sooner than 10s however often", err: down, fails: 50, want: 10 * time.Second},
		{name: "a refused token is retried slowly", err: denied, fails: 1, want: deniedBase},
		{name: "up to deniedMax", err: denied, fails: 50, want: deniedMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := watchRetry(tt.err, tt.fails); got != tt.want {
				t.Errorf("watchRetry(%v, %d) = %s, want %s", tt.err, tt.fails, got, tt.want)
			}
		})
	}
}

// The loop acts on the newest plan only: one it has not taken yet is replaced.
func TestOfferNewest(t *testing.T) {
	out := make(chan int, 1)
	offerNewest(out, 1)
	offerNewest(out, 2)
	if got := <-out; got != 2 {
		t.Fatalf("took %d, want the newest (2)", got)
	}
	if len(out) != 0 {
		t.Fatal("an older value stayed behind")
	}
	offerNewest(out, 3)
	if got := <-out; got != 3 {
		t.Fatalf("took %d after the channel was emptied, want 3", got)
	}
}

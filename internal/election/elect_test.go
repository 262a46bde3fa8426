package election

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

func electionSim(t *testing.T) (*nomadsim.Sim, *api.Client) {
	t.Helper()
	sim, c := simtest.Start(t, nomadsim.Config{AllowShortLockTTL: true}, nil)
	return sim, c
}

// newLock gives each candidate a lock on a client of its own, as the daemon does.
func newLock(t *testing.T, shared *api.Client, ttl time.Duration) Lock {
	t.Helper()
	return simtest.LeaderLock(t, shared.Address(), ttl)
}

// leaders counts how many candidates run their protected function at once.
type leaders struct {
	now, max, runs atomic.Int32
	started        chan int
}

func (l *leaders) fn(id int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		n := l.now.Add(1)
		for {
			m := l.max.Load()
			if n <= m || l.max.CompareAndSwap(m, n) {
				break
			}
		}
		l.runs.Add(1)
		l.started <- id
		<-ctx.Done()
		l.now.Add(-1)
		return nil
	}
}

// A candidate that stops releases the lock, and another takes over at once: it
// waits on the lock variable with a blocking query rather than a 2×TTL expiry.
func TestElectionHandOverOnStop(t *testing.T) {
	_, c := electionSim(t)
	st := store.New(c.Variables(), "rollboot", "")
	ttl := 2 * time.Second
	l := &leaders{started: make(chan int, 10)}
	ctxs := make([]context.CancelFunc, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		lock := newLock(t, c, ttl)
		wg.Add(1)
		go func() { defer wg.Done(); _ = RunElected(ctx, lock, st.WatchLeader, nil, l.fn(i)) }()
	}
	defer func() {
		for _, cancel := range ctxs {
			cancel()
		}
		wg.Wait()
	}()
	first := <-l.started
	start := time.Now()
	ctxs[first]()
	select {
	case next := <-l.started:
		if next == first {
			t.Fatal("the stopped candidate led again")
		}
		// Far below 2×TTL + lock delay (6s): the release was seen at once.
		if d := time.Since(start); d > ttl {
			t.Errorf("hand-over took %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over")
	}
	if m := l.max.Load(); m != 1 {
		t.Errorf("%d leaders at once", m)
	}
}

// A leader whose renewals fail stops leading within TTL/2 of the failure, before
// Nomad could give the lock to anyone else (2×TTL + lock delay).
func TestElectionStopsWhenRenewalFails(t *testing.T) {
	sim, c := electionSim(t)
	st := store.New(c.Variables(), "rollboot", "")
	ttl := 400 * time.Millisecond
	l := &leaders{started: make(chan int, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan time.Time, 1)
	lock := newLock(t, c, ttl)
	go func() {
		_ = RunElected(ctx, lock, st.WatchLeader, nil, func(ctx context.Context) error {
			err := l.fn(0)(ctx)
			stopped <- time.Now()
			return err
		})
	}()
	<-l.started
	failAt := time.Now()
	if err := sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/var/rollboot/leader", Method: "PUT", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-stopped:
		// The next renewal comes within TTL/4 and is given TTL/2.
		if d := at.Sub(failAt); d > ttl {
			t.Errorf("kept leading %s after renewals began to fail", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still leading while renewals fail")
	}
}

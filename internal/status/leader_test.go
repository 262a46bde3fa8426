package status

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// waitPolicy waits until the status's policy lines satisfy ok.
func waitPolicy(t *testing.T, st PolicyStore, what string, ok func(Policy) bool) Policy {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := readPolicy(t.Context(), st)
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the status says %+v", what, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// safeDefault is a policy source with no policy stored: the safe default.
type safeDefault struct{ timing phase.Timing }

func (p safeDefault) Rules(context.Context) (rules.Rules, error) {
	return rules.Rules{Timing: p.timing, HistorySize: 10}, nil
}

func (safeDefault) Watch(ctx context.Context, idx uint64, _ time.Duration) (uint64, error) {
	<-ctx.Done()
	return idx, ctx.Err()
}

// Against the emulator: the status names the coordinator that leads while it
// holds the election lock, and says none leads once it released it, once a
// lock that was never renewed expired, and names the next one once it said so.
func TestStatusTellsWhetherTheLeaderStillLeads(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{AllowShortLockTTL: true}, nil)
	st := store.New(c.Variables(), "rollboot", "")
	timing := phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute}
	lead := func(identity string) (stop func()) {
		co := coordinator.New(coordinator.Options{
			Deps:    coordinator.Deps{Nodes: c.Nodes(), Store: st, Policy: safeDefault{timing}},
			Rules:   rules.Rules{Timing: timing},
			Runtime: coordinator.Runtime{Identity: identity, Resync: time.Second},
		})
		ctx, cancel := context.WithCancel(context.Background())
		lock := simtest.LeaderLock(t, sim.Address(), 10*time.Second)
		var wg sync.WaitGroup
		wg.Go(func() { _ = election.RunElected(ctx, lock, st.WatchLeader, nil, co.Run) })
		return func() { cancel(); wg.Wait() }
	}

	stopA := lead("a (pid 1)")
	waitPolicy(t, st, "a leads", func(p Policy) bool { return p.Leader == "a (pid 1)" && !p.LeaderGone && p.LockError == "" })
	stopA() // a clean stop releases the lock
	p := waitPolicy(t, st, "a released the lock", func(p Policy) bool { return p.LeaderGone })
	if p.Leader != "a (pid 1)" {
		t.Errorf("the last leader named: %q", p.Leader)
	}

	stopB := lead("b (pid 2)")
	waitPolicy(t, st, "b leads", func(p Policy) bool { return p.Leader == "b (pid 2)" && !p.LeaderGone })
	stopB()

	// A coordinator that stops renewing without a release (its host lost
	// power): Nomad frees the lock after 2×TTL and the lock delay.
	l := simtest.LeaderLock(t, sim.Address(), time.Second)
	if _, err := l.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	idx, err := st.LeaderLockIndex(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.Enforcement(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutEnforcement(t.Context(), store.Enforcement{Leader: "c (pid 3)", LockIndex: idx}, e.ModifyIndex); err != nil {
		t.Fatal(err)
	}
	if p := readPolicy(t.Context(), st); p.LeaderGone || p.Leader != "c (pid 3)" {
		t.Fatalf("c holds the lock: the status says %+v", p)
	}
	start := time.Now()
	waitPolicy(t, st, "c's lock expired", func(p Policy) bool { return p.LeaderGone })
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the lock was gone after %s, before its 2×TTL", d)
	}
}

package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

func TestQuietPeriod(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Minute},         // no census: the shortest period
		{10, time.Minute},        // 40s, raised to the shortest
		{100, 400 * time.Second}, // n × interval
		{1000, 4000 * time.Second},
		{5000, 2 * time.Hour}, // capped
	} {
		if got := QuietPeriod(tc.n, DefaultQuietInterval, DefaultQuietMinPeriod, DefaultQuietMaxPeriod); got != tc.want {
			t.Errorf("QuietPeriod(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

// lockAt is newLock at another path.
func lockAt(t *testing.T, shared *api.Client, path string, ttl time.Duration) Lock {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: shared.Address()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Locks(api.WriteOptions{}, api.Variable{Path: path,
		Lock: &api.VariableLock{TTL: ttl.String(), LockDelay: ttl.String()}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var errDead = errors.New("candidate is dead")

// mortal is a lock of a candidate that can die: from then on every request fails
// (its process is gone), so nothing it holds is released and Nomad frees it only
// at its expiry. held says whether it holds the lock as far as it knows.
type mortal struct {
	Lock
	dead *atomic.Bool
	held atomic.Bool
}

func (m *mortal) Acquire(ctx context.Context) (string, error) {
	if m.dead.Load() {
		return "", errDead
	}
	id, err := m.Lock.Acquire(ctx)
	if err == nil && id != "" {
		m.held.Store(true)
	}
	return id, err
}

func (m *mortal) Renew(ctx context.Context) error {
	if m.dead.Load() {
		return errDead
	}
	err := m.Lock.Renew(ctx)
	if err != nil {
		m.held.Store(false)
	}
	return err
}

func (m *mortal) Release(ctx context.Context) error {
	if m.dead.Load() {
		return errDead
	}
	m.held.Store(false)
	return m.Lock.Release(ctx)
}

// contender is one RunStandby candidate of a test.
type contender struct {
	dead      atomic.Bool
	onStandby atomic.Bool // as OnStandby last said
	leader    *mortal
	slots     []*mortal
	cancel    context.CancelFunc
}

func (c *contender) standingBy() bool {
	for _, s := range c.slots {
		if s.held.Load() {
			return true
		}
	}
	return false
}

// runCandidates starts n candidates with k standby slots, a lock TTL of ttl and
// a census of n (published: false, the census is never published), and returns
// them; they stop with the test.
func runCandidates(t *testing.T, c *api.Client, n, k int, ttl, interval time.Duration, l *leaders, published bool) []*contender {
	t.Helper()
	st := store.New(c.Variables(), "rollboot", "")
	census := func(context.Context) (int, error) { return n, nil }
	if !published {
		census = st.Census
	}
	out := make([]*contender, n)
	var wg sync.WaitGroup
	for i := range n {
		cd := &contender{}
		cd.leader = &mortal{Lock: newLock(t, c, ttl), dead: &cd.dead}
		sb := Standbys{Census: census, Interval: interval, MinPeriod: interval, MaxPeriod: time.Hour,
			OnStandby: cd.onStandby.Store}
		for j := range k {
			m := &mortal{Lock: lockAt(t, c, st.StandbyPath(j), ttl), dead: &cd.dead}
			cd.slots = append(cd.slots, m)
			sb.Slots = append(sb.Slots, m)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cd.cancel = cancel
		out[i] = cd
		wg.Add(1)
		go func() { defer wg.Done(); _ = RunStandby(ctx, cd.leader, st.WatchLeader, sb, nil, l.fn(i)) }()
	}
	t.Cleanup(func() {
		for _, cd := range out {
			cd.cancel()
		}
		wg.Wait()
	})
	return out
}

func allStandingBy(cands []*contender, idx []int) bool {
	for _, i := range idx {
		if !cands[i].onStandby.Load() {
			return false
		}
	}
	return true
}

// When the leader and every standby die at once (nothing released: their locks
// only expire), a quiet candidate takes a freed slot and then the leader lock;
// there is never more than one leader. Also before any census was published:
// then the candidates without a slot contend for the leader lock themselves.
func TestStandbyQuietCandidatesTakeOver(t *testing.T) {
	for _, published := range []bool{true, false} {
		t.Run(fmt.Sprintf("census published %t", published), func(t *testing.T) { quietTakeOver(t, published) })
	}
}

func quietTakeOver(t *testing.T, published bool) {
	_, c := electionSim(t)
	ttl := 500 * time.Millisecond
	l := &leaders{started: make(chan int, 100)}
	cands := runCandidates(t, c, 8, 2, ttl, 50*time.Millisecond, l, published)
	first := <-l.started
	// Wait for both slots to be held by candidates other than the leader.
	// Without a census the others contend themselves and nobody refills the
	// slot the leader gave up: then one standby or two.
	want := 2
	if !published {
		want = 1
	}
	deadline := time.Now().Add(10 * time.Second)
	var standbys []int
	for {
		standbys = standbys[:0]
		for i, cd := range cands {
			if i != first && cd.standingBy() {
				standbys = append(standbys, i)
			}
		}
		if len(standbys) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standbys %v, want %d", standbys, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// OnStandby (the rollboot_standby gauge) says the same: the standbys stand
	// by, the leader does not.
	for !allStandingBy(cands, standbys) {
		if time.Now().After(deadline) {
			t.Fatalf("OnStandby not told of standbys %v", standbys)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cands[first].onStandby.Load() {
		t.Error("OnStandby says the leader stands by")
	}
	killed := map[int]bool{first: true}
	start := time.Now()
	cands[first].dead.Store(true)
	for _, i := range standbys {
		killed[i] = true
		cands[i].dead.Store(true)
	}
	select {
	case next := <-l.started:
		if killed[next] {
			t.Fatalf("dead candidate %d led", next)
		}
		// Nomad frees the locks 2×TTL + lock delay (1.5s) after their last
		// renewal; a quiet candidate tries a slot about every 50ms.
		t.Logf("candidate %d took over %s after the leader and both standbys died", next, time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("no quiet candidate took over")
	}
	if m := l.max.Load(); m != 1 {
		t.Errorf("%d leaders at once", m)
	}
}

// A standby replaces a leader that stops at once (the release wakes its
// blocking query), and a leader that dies within about 2×TTL + lock delay, as
// RunElected does.
func TestStandbyTakesOverFromLeader(t *testing.T) {
	_, c := electionSim(t)
	ttl := 500 * time.Millisecond
	l := &leaders{started: make(chan int, 100)}
	cands := runCandidates(t, c, 5, 2, ttl, 50*time.Millisecond, l, true)
	first := <-l.started
	time.Sleep(ttl) // the standbys are in place and waiting
	start := time.Now()
	cands[first].cancel()
	var second int
	select {
	case second = <-l.started:
		if d := time.Since(start); d > ttl {
			t.Errorf("hand-over after a clean stop took %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over a released lock")
	}
	start = time.Now()
	cands[second].dead.Store(true)
	select {
	case <-l.started:
		// 2×TTL + lock delay after the last renewal, and the renewal period.
		if d := time.Since(start); d > 3*ttl+ttl/2+ttl {
			t.Errorf("take-over of a dead leader took %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over from a dead leader")
	}
	if m := l.max.Load(); m != 1 {
		t.Errorf("%d leaders at once", m)
	}
}

// requestsPerSecond counts the requests n idle candidates send once settled.
func requestsPerSecond(t *testing.T, n, standbys int) float64 {
	sim, c := electionSim(t)
	ttl := 400 * time.Millisecond
	l := &leaders{started: make(chan int, n+10)}
	if standbys == 0 {
		st := store.New(c.Variables(), "rollboot", "")
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		for i := range n {
			lock := newLock(t, c, ttl)
			wg.Add(1)
			go func() { defer wg.Done(); _ = RunElected(ctx, lock, st.WatchLeader, nil, l.fn(i)) }()
		}
		t.Cleanup(func() { cancel(); wg.Wait() })
	} else {
		runCandidates(t, c, n, standbys, ttl, 100*time.Millisecond, l, true)
	}
	<-l.started
	time.Sleep(4 * ttl) // settle: every candidate's first attempts
	sim.ResetRequestStats()
	window := 3 * time.Second
	time.Sleep(window)
	return float64(sim.RequestStats().Requests) / window.Seconds()
}

// The requests of an idle election do not grow with the candidates when only the
// standbys contend, and do without standbys.
func TestStandbyIdleRequestsIndependentOfCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("counts requests over windows of seconds")
	}
	few, many := 5, 40
	fewS, manyS := requestsPerSecond(t, few, 2), requestsPerSecond(t, many, 2)
	fewE, manyE := requestsPerSecond(t, few, 0), requestsPerSecond(t, many, 0)
	t.Logf("requests/s with standbys: %.1f at %d candidates, %.1f at %d; every candidate contending: %.1f, %.1f",
		fewS, few, manyS, many, fewE, manyE)
	// Leader renewals (4/TTL), standby renewals (2 × 2/TTL), quiet attempts (two
	// requests per interval): about 30/s whatever the candidates.
	if manyS > 1.5*fewS+5 {
		t.Errorf("with standbys %d candidates cost %.1f requests/s, %d cost %.1f: it grows with the candidates", many, manyS, few, fewS)
	}
	// The control: without standbys the same count grows with the candidates,
	// so the window does measure the waiting candidates.
	if manyE < 3*fewE {
		t.Errorf("without standbys %d candidates cost %.1f requests/s, %d cost %.1f: the measure cannot tell", many, manyE, few, fewE)
	}
}

package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every index is called once, never more than limit at a time.
func TestEachBoundsTheCalls(t *testing.T) {
	var (
		mu            sync.Mutex
		seen          = map[int]int{}
		inFlight, top int
	)
	Each(50, 4, nil, func(i int) {
		mu.Lock()
		seen[i]++
		inFlight++
		top = max(top, inFlight)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	if len(seen) != 50 {
		t.Errorf("%d indexes called, want 50", len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("index %d called %d times", i, n)
		}
	}
	if top > 4 || top < 1 {
		t.Errorf("at most %d calls at once, want 1 to 4", top)
	}
}

// Once stop reports true, no further index is handed out.
func TestEachStops(t *testing.T) {
	var calls atomic.Int32
	Each(100, 1, func() bool { return calls.Load() >= 3 }, func(int) { calls.Add(1) })
	if n := calls.Load(); n < 3 || n > 4 {
		t.Errorf("%d calls, want 3 (or 4: one handed out as stop turned)", n)
	}
}

// No work: no call, and it returns.
func TestEachNothing(t *testing.T) {
	Each(0, 16, nil, func(int) { t.Error("called") })
}

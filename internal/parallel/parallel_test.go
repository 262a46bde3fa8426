package parallel

import (
	"fmt"
	"slices"
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

func TestMap(t *testing.T) {
	got, err := Map(5, 2, func(i int) (int, error) { return i * i, nil })
	if err != nil || !slices.Equal(got, []int{0, 1, 4, 9, 16}) {
		t.Fatalf("Map = %v, %v; want the squares in order", got, err)
	}
	var calls atomic.Int64
	_, err = Map(100, 1, func(i int) (int, error) {
		calls.Add(1)
		if i >= 3 {
			return 0, fmt.Errorf("call %d failed", i)
		}
		return i, nil
	})
	// One more index may be on its way to the worker when call 3 fails.
	if err == nil || err.Error() != "call 3 failed" || calls.Load() > 5 {
		t.Fatalf("Map: %v after %d calls; want the first failure, call 3's, and at most one call after it", err, calls.Load())
	}
}

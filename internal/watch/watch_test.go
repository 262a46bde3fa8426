package watch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a full sleep reported a dead context")
	}
	if !Sleep(context.Background(), 0) {
		t.Fatal("a zero sleep on a live context reported it dead")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("a sleep on an ended context reported it alive")
	}
	if time.Since(start) > time.Second {
		t.Fatal("a sleep on an ended context did not return at once")
	}
	if Sleep(ctx, 0) {
		t.Fatal("a zero sleep on an ended context reported it alive")
	}
}

// script answers a Loop's queries from a list of (index, error) answers, records
// the index each query was asked with, and ends the context after the last one.
type script struct {
	mu      sync.Mutex
	answers []answer
	asked   []uint64
	cancel  context.CancelFunc
}

type answer struct {
	n   uint64
	err error
}

func (s *script) query(ctx context.Context, idx uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, idx)
	if len(s.asked) > len(s.answers) {
		s.cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	}
	a := s.answers[len(s.asked)-1]
	return a.n, a.err
}

func TestLoop(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		index     uint64
		answers   []answer
		wantAsked []uint64
		wantSeen  []uint64
		wantFails []int
	}{
		{
			name:      "each new index is a change; an unchanged one is not",
			answers:   []answer{{5, nil}, {5, nil}, {9, nil}},
			wantAsked: []uint64{0, 5, 5, 9},
			wantSeen:  []uint64{5, 9},
		},
		{
			name:      "an error restarts at index 0 and the next answer counts as a change",
			answers:   []answer{{5, nil}, {0, boom}, {0, boom}, {5, nil}},
			wantAsked: []uint64{0, 5, 0, 0, 5},
			wantSeen:  []uint64{5, 5},
			wantFails: []int{1, 2},
		},
		{
			name:      "an index that goes backwards starts over at 0",
			answers:   []answer{{9, nil}, {3, nil}, {4, nil}},
			wantAsked: []uint64{0, 9, 0, 4},
			wantSeen:  []uint64{9, 0, 4},
		},
		{
			name:      "a loop started from an index asks from it, and the same index again is no change",
			index:     5,
			answers:   []answer{{5, nil}, {7, nil}},
			wantAsked: []uint64{5, 5, 7},
			wantSeen:  []uint64{7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &script{answers: tt.answers, cancel: cancel}
			var seen []uint64
			var fails []int
			Loop{
				Query:    s.query,
				OnChange: func(n uint64) { seen = append(seen, n) },
				Retry:    func(error, int) time.Duration { return time.Millisecond },
				OnError:  func(_ error, n int, _ time.Duration) { fails = append(fails, n) },
				Index:    tt.index,
			}.Run(ctx)
			if !slices.Equal(s.asked, tt.wantAsked) {
				t.Errorf("asked with indexes %v, want %v", s.asked, tt.wantAsked)
			}
			if !slices.Equal(seen, tt.wantSeen) {
				t.Errorf("changes %v, want %v", seen, tt.wantSeen)
			}
			if len(fails) != len(tt.wantFails) || !slices.Equal(fails, tt.wantFails) {
				t.Errorf("errors reported with counts %v, want %v", fails, tt.wantFails)
			}
		})
	}
}

func TestLoopBacksOffAndStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	var retries []time.Duration
	go func() {
		defer close(done)
		Loop{
			Query: func(context.Context, uint64) (uint64, error) {
				calls++
				if calls == 3 {
					cancel()
				}
				return 0, errors.New("down")
			},
			OnError: func(_ error, _ int, d time.Duration) { retries = append(retries, d) },
		}.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not stop when its context ended")
	}
	if calls != 3 {
		t.Fatalf("queried %d times, want 3 (no query after the context ended)", calls)
	}
	if len(retries) != 2 || retries[0] != 100*time.Millisecond || retries[1] != 200*time.Millisecond {
		t.Fatalf("default retries %v, want [100ms 200ms] (and none reported after the context ended)", retries)
	}
}

// A query that never answers (a server that accepts and says nothing, behind a
// client with no deadline of its own) ends at the loop's Timeout, counts as an
// error, and is asked again from index 0: the next answer is seen as a change.
func TestLoopAbandonsAHungQuery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var asked []uint64
	var errs []error
	var seen []uint64
	Loop{
		Query: func(qctx context.Context, idx uint64) (uint64, error) {
			asked = append(asked, idx)
			switch len(asked) {
			case 1:
				return 7, nil
			case 2:
				<-qctx.Done() // hung: only its context ends it
				return 0, qctx.Err()
			case 3:
				return 7, nil
			}
			cancel()
			return idx, nil
		},
		OnChange: func(n uint64) { seen = append(seen, n) },
		Retry:    func(error, int) time.Duration { return time.Millisecond },
		OnError:  func(err error, _ int, _ time.Duration) { errs = append(errs, err) },
		Timeout:  50 * time.Millisecond,
	}.Run(ctx)
	if !slices.Equal(asked, []uint64{0, 7, 0, 7}) {
		t.Errorf("asked with indexes %v, want [0 7 0 7]", asked)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("errors %v, want one deadline", errs)
	}
	if !slices.Equal(seen, []uint64{7, 7}) {
		t.Errorf("changes %v, want [7 7]: the answer after the hang is a change", seen)
	}
}

// A query that ignores its context and answers only after the timeout still
// counts as unanswered.
func TestLoopLateAnswerIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errs []error
	calls := 0
	Loop{
		Query: func(qctx context.Context, idx uint64) (uint64, error) {
			calls++
			if calls > 1 {
				cancel()
				return idx, nil
			}
			<-qctx.Done()
			return 3, nil
		},
		Retry:   func(error, int) time.Duration { return time.Millisecond },
		OnError: func(err error, _ int, _ time.Duration) { errs = append(errs, err) },
		Timeout: 20 * time.Millisecond,
	}.Run(ctx)
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("errors %v, want one deadline", errs)
	}
}

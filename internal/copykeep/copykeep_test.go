package copykeep

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// countingStore counts the writes of the copies, handing each on written.
type countingStore struct {
	written chan struct{}
}

func (s *countingStore) LoadCopies(context.Context) error { return nil }
func (s *countingStore) CopiesUsed() (int, int)           { return 0, 0 }
func (s *countingStore) WriteCopies(context.Context) (int, error) {
	s.written <- struct{}{}
	return 1, nil
}

// Outside a term the copies are written at once after a pass; in a term the
// writer beside the loop writes them, and stops with the term.
func TestWrittenAfterPasses(t *testing.T) {
	st := &countingStore{written: make(chan struct{}, 4)}
	k := &Keeper{Store: st, Log: slog.New(slog.DiscardHandler)}
	k.After(context.Background())
	if len(st.written) != 1 {
		t.Fatalf("outside a term: %d writes at once, want 1", len(st.written))
	}
	<-st.written
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := k.Start(ctx, &wg)
	k.After(ctx)
	select {
	case <-st.written:
	case <-time.After(10 * time.Second):
		t.Fatal("the term's writer did not write after the pass")
	}
	stop()
	cancel()
	wg.Wait()
	if k.After(context.Background()); len(st.written) != 1 {
		t.Errorf("after the term: %d writes at once, want 1", len(st.written))
	}
}

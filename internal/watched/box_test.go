package watched

import (
	"context"
	"testing"
	"time"
)

// A waiter looks again at every change and returns once its condition holds;
// it gives up when its wait runs out or its context ends; a term that ended
// shows as ended.
func TestBoxWait(t *testing.T) {
	var b Box[Value[int]]
	term, end := context.WithCancel(context.Background())
	b.Start(term, func(v *Value[int]) { v.Failed() })
	at := func(index uint64) func(v *Value[int], _ bool) bool {
		return func(v *Value[int], _ bool) bool { return v.Live && v.Index >= index }
	}
	if b.Wait(context.Background(), at(3), 20*time.Millisecond) {
		t.Fatal("nothing answered, but the wait ended done")
	}
	done := make(chan bool)
	go func() { done <- b.Wait(context.Background(), at(3), 0) }()
	b.Update(func(v *Value[int]) { v.Answered(2, 20, true) }) // not yet
	b.Update(func(v *Value[int]) { v.Answered(3, 30, true) })
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the wait gave up with its condition met")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not see the change")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Wait(ctx, at(9), 0) {
		t.Fatal("a wait whose context ended ended done")
	}
	end()
	var ended bool
	got := b.Take(func(v *Value[int], e bool) Value[int] { ended = e; return *v })
	if !ended || got.Val != 30 {
		t.Errorf("took %+v, ended %v; want 30 and the term ended", got, ended)
	}
}

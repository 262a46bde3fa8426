package watched

import (
	"context"
	"sync"
	"time"
)

// Box is where watches leave their newest answers (A, typically a struct of
// Values) for one consumer, under one lock: the watches Update it from their
// goroutines, the consumer Takes what it decides from, and a waiter (Wait)
// looks again at every change. Its term is the context of the watches: once
// it ends, no watch answers any more (ended).
type Box[A any] struct {
	mu   sync.Mutex
	term context.Context
	a    A
	// changed is closed and replaced at every change (nil: none waits).
	changed chan struct{}
}

// Start begins a term of the watches (nil: none, as in tests that answer for
// a watch), reset makes what was answered before count no more.
func (b *Box[A]) Start(term context.Context, reset func(a *A)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.term = term
	reset(&b.a)
	b.wake()
}

// Update runs fn on the answers, for a watch's goroutine.
func (b *Box[A]) Update(fn func(a *A)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(&b.a)
	b.wake()
}

// Take returns what fn makes of the answers for the consumer (fn may change
// them: what it took); ended: the term ended.
func (b *Box[A]) Take(fn func(a *A, ended bool) A) A {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := fn(&b.a, b.ended())
	b.wake()
	return out
}

// Read runs fn on the answers, changing nothing.
func (b *Box[A]) Read(fn func(a *A, ended bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(&b.a, b.ended())
}

// Wait waits until done says so of the answers, looking again at every
// change, for at most wait (0: no limit); false when ctx ended or wait ran
// out first.
func (b *Box[A]) Wait(ctx context.Context, done func(a *A, ended bool) bool, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		b.mu.Lock()
		if done(&b.a, b.ended()) {
			b.mu.Unlock()
			return true
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// ended reports whether the term ended (b.mu held).
func (b *Box[A]) ended() bool { return b.term != nil && b.term.Err() != nil }

// wake wakes the waiters (b.mu held).
func (b *Box[A]) wake() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

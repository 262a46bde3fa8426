// Package parallel runs a bounded number of calls at once: the reads a new
// leader makes of every variable, the plans a pass stores together.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Each calls fn(i) for every i in [0, n), at most limit calls at a time, and
// returns once every call has returned. When stop is set and reports true, no
// further index is handed out (the calls started finish). The callers keep
// their own results and errors, each at its index or under their own lock.
func Each(n, limit int, stop func() bool, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(max(limit, 1), n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		if stop != nil && stop() {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

// Map calls fn(i) for every i in [0, n), at most limit calls at a time, and
// returns their results in order. After a call fails no further index is
// handed out (as with Each's stop, those already on their way are called); the
// error returned is that of the lowest index that failed (zero results stand
// for the calls not made then).
func Map[T any](n, limit int, fn func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	var failed atomic.Bool
	Each(n, limit, failed.Load, func(i int) {
		if out[i], errs[i] = fn(i); errs[i] != nil {
			failed.Store(true)
		}
	})
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

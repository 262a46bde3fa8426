// Package parallel runs a bounded number of calls at once: the reads a new
// leader makes of every variable, the plans a pass stores together.
package parallel

import "sync"

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

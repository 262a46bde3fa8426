// Package watch holds the two waiting primitives every long-running part of
// rollboot shares: a sleep that ends with its context, and a blocking-query loop
// with backoff on errors.
//
// A blocking query (Nomad's ?index=N&wait=D) answers when the data it read has an
// index above N, or when the wait runs out. The loop follows Nomad's advice for
// clients of blocking queries (website/content/api-docs/index.mdx, "Blocking
// Queries"): start at index 0, pass the last index back, treat an index that went
// backwards as a reset to 0, and back off after errors instead of spinning.
package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// Sleep waits for d or until ctx ends, and reports whether ctx is still alive.
// A d of zero or less returns at once.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Query is one blocking query: it waits until the data it reads has an index
// above index (or its own wait runs out) and returns the index of that data. A
// query must block: one that answers at once with an unchanged index makes the
// loop spin (a query that has nothing to block on sleeps itself).
type Query func(ctx context.Context, index uint64) (uint64, error)

// Loop runs a Query again and again.
type Loop struct {
	// Query is the blocking query.
	Query Query
	// OnChange is called after every answer whose index differs from the one
	// passed in (so after the first answer with data). It runs on the loop's
	// goroutine, and the loop waits for it.
	OnChange func(index uint64)
	// Retry gives the wait after the fails-th error in a row; nil means
	// DefaultRetry.
	Retry func(err error, fails int) time.Duration
	// OnError, if set, is told of every error with the wait before the next try
	// (for logging). It is not called once ctx has ended.
	OnError func(err error, fails int, retry time.Duration)
	// Timeout bounds each query: its context ends then, and a query still
	// unanswered counts as an error (retried like any other). 0 means
	// DefaultTimeout. So a query the server accepts and never answers cannot
	// stop the loop, whatever the client's transport does.
	Timeout time.Duration
	// Index is where the first query starts: the index of what the caller
	// already read (0: read first). The first answer then comes only with a
	// change past it. After an error the loop starts over from 0.
	Index uint64
}

// MaxWait is the longest wait of a blocking query: Nomad and Consul cap a
// query's wait at 5 minutes (Nomad structs.MaxBlockingRPCQueryTime, Consul
// agent/consul/rpc.go maxQueryTime).
const MaxWait = 5 * time.Minute

// LongestWait is how long a blocking query of MaxWait may wait at most: the
// wait, plus the jitter the server may add to it (wait/16, nomad/rpc.go
// blockingRPC).
const LongestWait = MaxWait + MaxWait/16

// DefaultTimeout bounds a query of a Loop that sets no Timeout: the longest
// wait, plus time for the answer to travel.
const DefaultTimeout = LongestWait + 10*time.Second

// DefaultRetry backs off from 100 ms to 5 s, doubling per error in a row.
func DefaultRetry(_ error, fails int) time.Duration {
	return policy.Backoff(100*time.Millisecond, 5*time.Second, fails)
}

// Run loops until ctx ends. After an error it waits and starts again at index 0,
// so that the next answer counts as a change: whatever happened while the query
// failed is seen.
func (l Loop) Run(ctx context.Context) {
	retry := l.Retry
	if retry == nil {
		retry = DefaultRetry
	}
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	idx := l.Index
	fails := 0
	for ctx.Err() == nil {
		n, err := l.query(ctx, idx, timeout)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			d := retry(err, fails)
			if l.OnError != nil {
				l.OnError(err, fails, d)
			}
			if !Sleep(ctx, d) {
				return
			}
			idx = 0
			continue
		}
		fails = 0
		changed := n != idx
		if n < idx {
			n = 0 // the index went backwards (a restored snapshot): start over
		}
		idx = n
		if changed && l.OnChange != nil {
			l.OnChange(idx)
		}
	}
}

// query runs one query with its timeout; an answer that comes after it is an
// error, whatever the query returned.
func (l Loop) query(ctx context.Context, idx uint64, timeout time.Duration) (uint64, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := l.Query(qctx, idx)
	if err == nil && qctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("blocking query unanswered after %s: %w", timeout, qctx.Err())
	}
	return n, err
}

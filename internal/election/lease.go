package election

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrLeaseLapsed is returned instead of acting on a Nomad node when this
// coordinator cannot be sure it still leads.
var ErrLeaseLapsed = errors.New("leadership lease lapsed: not acting until it is renewed")

// lease is the leader's view of its own lock: when it last renewed it. Nomad frees
// a lock 2×TTL + lock delay after the last renewal (nomad/locks.go), so a leader
// whose last renewal is older than TTL/2 may already have a successor. A process
// that was paused (SIGSTOP, a VM freeze, a long GC) resumes with its pass half
// done and its renewal not yet failed: without this check it would go on
// draining and un-draining nodes that its successor manages. Drains and
// eligibility changes are not check-and-set, so they are fenced here; plans are
// written with check-and-set and fail by themselves.
type lease struct {
	base    time.Time // monotonic reading: Since(base) survives clock steps
	ttl     time.Duration
	renewed atomic.Int64 // Since(base) at the last renewal, in nanoseconds
}

// newLease starts a lease acquired now.
func newLease(ttl time.Duration) *lease {
	l := &lease{base: time.Now(), ttl: ttl}
	return l
}

// now is the lease's monotonic clock.
func (l *lease) now() time.Duration { return time.Since(l.base) }

// renewed records a successful renewal whose request was sent at sent (a reading
// of now): Nomad's countdown started no earlier than that.
func (l *lease) renewedAt(sent time.Duration) { l.renewed.Store(int64(sent)) }

// check returns ErrLeaseLapsed once TTL/2 has passed since the last renewal.
func (l *lease) check() error {
	age := time.Since(l.base) - time.Duration(l.renewed.Load())
	if age > l.ttl/2 {
		return fmt.Errorf("%w (last renewed %s ago, lock TTL %s)", ErrLeaseLapsed, age.Round(time.Millisecond), l.ttl)
	}
	return nil
}

type leaseKey struct{}

// CheckLease returns ErrLeaseLapsed when ctx carries the lease of an election
// that this coordinator may have lost. A context without a lease (a coordinator
// run without an election, as in tests) always passes.
func CheckLease(ctx context.Context) error {
	if l, ok := ctx.Value(leaseKey{}).(*lease); ok {
		return l.check()
	}
	return nil
}

// LeaseTransport wraps next so that a write (any method but GET and HEAD) made
// with a context that carries a lapsed lease is refused right before it is
// sent. apply checks the lease before each node call, but a process stopped
// between that check and the request's write still sends the request when it
// resumes, possibly after its successor took over (a drain for a grant the
// successor ended: seen in the fault suite). Checking again inside the HTTP
// client leaves only the transport's own few steps as the window. Requests
// without a lease (the agent's, the election's) pass.
func LeaseTransport(next http.RoundTripper) http.RoundTripper {
	return leaseTransport{next}
}

type leaseTransport struct{ next http.RoundTripper }

func (t leaseTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := CheckLease(r.Context()); err != nil {
			if r.Body != nil {
				r.Body.Close() // a RoundTripper closes the body, even on error
			}
			return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
		}
	}
	return t.next.RoundTrip(r)
}

// WithLapsedLease returns ctx carrying a lease whose last renewal was a whole
// TTL ago, as a leader that lost its lock would hold: for the tests of code
// that CheckLease fences.
func WithLapsedLease(ctx context.Context) context.Context {
	l := newLease(time.Minute)
	l.renewedAt(l.now() - time.Minute)
	return context.WithValue(ctx, leaseKey{}, l)
}

package election

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLease(t *testing.T) {
	l := newLease(40 * time.Millisecond)
	if err := l.check(); err != nil {
		t.Fatalf("a lease just acquired: %v", err)
	}
	time.Sleep(30 * time.Millisecond) // past TTL/2: time itself is the input
	if err := l.check(); !errors.Is(err, ErrLeaseLapsed) {
		t.Fatalf("past TTL/2 without a renewal: %v, want ErrLeaseLapsed", err)
	}
	l.renewedAt(l.now())
	if err := l.check(); err != nil {
		t.Fatalf("just renewed: %v", err)
	}
	if err := CheckLease(context.Background()); err != nil {
		t.Fatalf("no election, no lease: %v", err)
	}
}

// leaseLock is a lock that is always acquired, and whose renewals succeed until
// hang is set; then they block until their deadline and fail.
type leaseLock struct {
	ttl  time.Duration
	hang hangGate
}

// hangGate is closed to make renewals hang.
type hangGate struct{ ch chan struct{} }

func (l *leaseLock) Acquire(context.Context) (string, error) { return "lock", nil }
func (l *leaseLock) Release(context.Context) error           { return nil }
func (l *leaseLock) LockTTL() time.Duration                  { return l.ttl }
func (l *leaseLock) Renew(ctx context.Context) error {
	select {
	case <-l.hang.ch:
		<-ctx.Done()
		return ctx.Err()
	default:
		return nil
	}
}

// The leader's pass sees its lease valid while the lock is renewed, and lapsed
// once renewals stop being confirmed, before the election gives up the lead.
func TestLeadKeepsTheLease(t *testing.T) {
	lock := &leaseLock{ttl: time.Second, hang: hangGate{ch: make(chan struct{})}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var valid, lapsed bool
	err := lead(ctx, lock, lock.ttl, func(ctx context.Context) error {
		time.Sleep(3 * lock.ttl / 4) // longer than TTL/2: only renewals keep it valid
		valid = CheckLease(ctx) == nil
		close(lock.hang.ch)
		deadline := time.Now().Add(5 * lock.ttl)
		for time.Now().Before(deadline) {
			if errors.Is(CheckLease(ctx), ErrLeaseLapsed) {
				lapsed = true
				break
			}
			time.Sleep(5 * time.Millisecond) // polling the clock-driven lease
		}
		<-ctx.Done()
		return nil
	})
	if err == nil {
		t.Error("lead returned no error after its renewals failed")
	}
	if !valid {
		t.Error("the lease lapsed although the lock was renewed")
	}
	if !lapsed {
		t.Error("the lease stayed valid although no renewal was confirmed")
	}
}

// The HTTP client refuses a leader's write once its lease lapsed, right before
// the request goes out: a process stopped between apply's check and the
// request sends nothing when it resumes. Reads, and requests without a lease,
// pass.
func TestLeaseTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	client := &http.Client{Transport: LeaseTransport(http.DefaultTransport)}
	l := newLease(time.Minute)
	leading := context.WithValue(context.Background(), leaseKey{}, l)
	do := func(ctx context.Context, method, path string) error {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(leading, http.MethodPut, "/v1/node/n1/drain"); err != nil {
		t.Fatalf("a write under a fresh lease: %v", err)
	}
	l.renewedAt(l.now() - time.Minute) // stopped past the TTL since the last renewal
	if err := do(leading, http.MethodPut, "/v1/node/n1/drain"); !errors.Is(err, ErrLeaseLapsed) {
		t.Errorf("a write under a lapsed lease: %v, want ErrLeaseLapsed", err)
	}
	if err := do(leading, http.MethodPost, "/v1/node/n1/eligibility"); !errors.Is(err, ErrLeaseLapsed) {
		t.Errorf("a POST under a lapsed lease: %v, want ErrLeaseLapsed", err)
	}
	if err := do(leading, http.MethodGet, "/v1/nodes"); err != nil {
		t.Errorf("a read under a lapsed lease: %v", err)
	}
	if err := do(context.Background(), http.MethodPut, "/v1/var/x"); err != nil {
		t.Errorf("a write without a lease: %v", err)
	}
	if want := []string{"PUT /v1/node/n1/drain", "GET /v1/nodes", "PUT /v1/var/x"}; !slices.Equal(got, want) {
		t.Errorf("the server saw %q, want %q", got, want)
	}
}

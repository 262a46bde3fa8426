package election

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/watch"
)

// Watch blocks until the lock variable's index passes index (or wait passes) and
// returns the new index; with index 0 it returns the current index at once.
type Watch func(ctx context.Context, index uint64, wait time.Duration) (uint64, error)

// Lock is a lease on a Nomad Variable lock; *api.Locks implements it.
type Lock interface {
	Acquire(ctx context.Context) (string, error)
	Renew(ctx context.Context) error
	Release(ctx context.Context) error
	LockTTL() time.Duration
}

// RunElected runs fn only while this instance holds lock, until ctx ends.
//
// It does not use api.LockLeaser: that helper keeps running the protected function
// after a renewal fails (its function context is only cancelled when Start
// returns), and releases with the already-cancelled context, so the lock lingers
// for 2×TTL+delay after a clean stop. Here fn's context is cancelled as soon as a
// renewal fails or cannot be confirmed within half the TTL, well before Nomad frees
// the lock for another holder (2×TTL + lock delay after the last renewal,
// nomad/locks.go), and a clean stop releases the lock at once.
//
// Between attempts a candidate waits for the lock variable to change (watchLock, a
// blocking query: a release or an expiry bumps its ModifyIndex), or at most 2×TTL,
// so that many candidates put little load on the Nomad servers and a released
// lock is taken over at once. watchLock may be nil: then it retries every TTL/2.
func RunElected(ctx context.Context, lock Lock, watchLock Watch, log *slog.Logger, fn func(ctx context.Context) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := lock.LockTTL() / 2
	for ctx.Err() == nil {
		if !contend(ctx, lock, watchLock, 2*lock.LockTTL(), log) {
			continue
		}
		leadAndRelease(ctx, lock, log, fn)
		if ctx.Err() != nil {
			return nil
		}
		watch.Sleep(ctx, retry)
	}
	return nil
}

// contend makes one attempt at lock and reports whether it was acquired. When the
// lock is held by another, it waits for the lock variable to change (a release or
// an expiry: renewals are no Raft writes and do not move its index), for at most
// wait; without watchLock it sleeps TTL/2.
func contend(ctx context.Context, lock Lock, watchLock Watch, wait time.Duration, log *slog.Logger) bool {
	ttl := lock.LockTTL()
	retry := ttl / 2
	var idx uint64
	if watchLock != nil {
		// Read the index first, so a change after the failed attempt wakes us.
		if n, err := bounded(ctx, ttl, func(ctx context.Context) (uint64, error) { return watchLock(ctx, 0, 0) }); err == nil {
			idx = n
		}
	}
	// Bounded like a renewal: a request never answered must not keep the
	// candidate from trying again (a lock taken by an attempt given up on
	// expires after its TTL).
	id, err := bounded(ctx, ttl, lock.Acquire)
	if err == nil && id != "" {
		return true
	}
	if err != nil && !errors.Is(err, api.ErrLockConflict) && ctx.Err() == nil {
		log.Warn("coordinator election: acquire failed", "err", err)
		watch.Sleep(ctx, retry)
		return false
	}
	if watchLock == nil || idx == 0 {
		watch.Sleep(ctx, retry)
		return false
	}
	start := time.Now()
	// Its wait, the jitter Nomad may add (wait/16), and a TTL for the answer.
	n, err := bounded(ctx, wait+wait/16+ttl, func(ctx context.Context) (uint64, error) { return watchLock(ctx, idx, wait) })
	if err != nil || (n == idx && time.Since(start) < ttl/10) {
		watch.Sleep(ctx, retry) // the query did not block: do not spin
	}
	return false
}

// leadAndRelease runs fn while this instance holds lock (lead), then releases
// the lock at once, whatever ended the lead.
func leadAndRelease(ctx context.Context, lock Lock, log *slog.Logger, fn func(ctx context.Context) error) {
	ttl := lock.LockTTL()
	log.Info("elected coordinator")
	err := lead(ctx, lock, ttl, fn)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/2)
	if rerr := lock.Release(rctx); rerr != nil && !errors.Is(rerr, api.ErrLockConflict) {
		log.Warn("coordinator election: release failed", "err", rerr)
	}
	cancel()
	if err != nil {
		log.Warn("coordinator stopped leading", "err", err)
	} else {
		log.Info("coordinator stopped leading")
	}
}

// lead runs fn while renewing the lock every TTL/4; it returns when ctx ends, fn
// returns, or a renewal fails.
func lead(ctx context.Context, lock Lock, ttl time.Duration, fn func(ctx context.Context) error) error {
	l := newLease(ttl)
	fctx, cancel := context.WithCancel(context.WithValue(ctx, leaseKey{}, l))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fctx) }()
	t := time.NewTicker(ttl / 4)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			cancel()
			return <-done
		case <-t.C:
			rctx, rcancel := context.WithTimeout(ctx, ttl/2)
			sent := l.now()
			err := lock.Renew(rctx)
			rcancel()
			if err != nil {
				cancel()
				<-done
				return err
			}
			l.renewedAt(sent)
		}
	}
}

// bounded calls fn with a context that ends after d (or with ctx).
func bounded[T any](ctx context.Context, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

package election

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/watch"
)

// Standbys bound the candidates that contend for the leader lock, so that an
// idle cluster costs Nomad the same number of requests per minute whatever the
// number of candidates.
//
// A candidate is in one of three states:
//
//   - leader: holds the leader lock and runs the coordinator (as with RunElected);
//   - standby: holds one of the standby slots, each a Nomad variable lock of its
//     own, and waits on the leader lock with blocking queries of the longest wait
//     Nomad grants (5 minutes): a renewal of the leader lock is no Raft write and
//     does not wake it, a release or an expiry does, and then the standby tries
//     the lock at once, as every candidate does with RunElected;
//   - quiet: holds nothing and contends for nothing. Now and then it tries one
//     slot at random, at a period that grows with the number of candidates that
//     the leader publishes (Census), so that all quiet candidates together try
//     about once per Interval. While the census counts few candidates (fewer
//     than MinPeriod / Interval) or none is published yet, a candidate without
//     a slot contends as with RunElected instead.
//
// Safety is the leader lock's alone, as with RunElected: a slot only decides who
// asks for it. A slot whose holder dies is freed by Nomad (2×TTL + lock delay
// after its last renewal) and taken by the next quiet candidate that tries it.
type Standbys struct {
	// Slots are the standby slots' locks (at least one).
	Slots []Lock
	// Census reads the number of candidates the leader published; a census
	// never published reads as 0 with no error.
	Census func(ctx context.Context) (int, error)
	// Count counts the candidates and Publish publishes the count; the leader
	// counts while it leads (publishLoop).
	Count   func(ctx context.Context) (int, error)
	Publish func(ctx context.Context, n int) error
	// Interval is the mean time between two attempts of the quiet candidates
	// taken together; MinPeriod and MaxPeriod bound one quiet candidate's period.
	Interval, MinPeriod, MaxPeriod time.Duration
	// CensusEvery is the longest time between two of the leader's counts
	// (0: DefaultCensusEvery).
	CensusEvery time.Duration
	// OnStandby, when set, is told when this candidate starts (true) and stops
	// (false) standing by with a slot: the rollboot_standby gauge.
	OnStandby func(standingBy bool)
}

// Defaults of the standby election (daemon.Standbys uses them).
const (
	DefaultQuietInterval  = 4 * time.Second
	DefaultQuietMinPeriod = time.Minute
	DefaultQuietMaxPeriod = 2 * time.Hour
	DefaultCensusEvery    = 10 * time.Minute
)

func (sb Standbys) standingBy(b bool) {
	if sb.OnStandby != nil {
		sb.OnStandby(b)
	}
}

// QuietPeriod is one quiet candidate's mean period between attempts when the
// census counts n candidates: n × interval, within [minP, maxP].
func QuietPeriod(n int, interval, minP, maxP time.Duration) time.Duration {
	p := time.Duration(n) * interval
	return min(max(p, minP), maxP)
}

// RunStandby runs fn only while this instance holds lock, until ctx ends, as
// RunElected does, but contends for lock only while it holds a standby slot or
// candidates are few (quiet).
func RunStandby(ctx context.Context, lock Lock, watchLock Watch, sb Standbys, log *slog.Logger, fn func(ctx context.Context) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(sb.Slots) == 0 {
		return RunElected(ctx, lock, watchLock, log, fn)
	}
	lfn := fn
	if sb.Count != nil && sb.Publish != nil {
		lfn = func(ctx context.Context) error {
			go sb.publishLoop(ctx, log)
			return fn(ctx)
		}
	}
	for ctx.Err() == nil {
		slot, elected := sb.quiet(ctx, lock, watchLock, log)
		if slot != nil {
			sb.standingBy(true)
			elected = standby(ctx, lock, watchLock, slot, log)
			releaseLock(ctx, slot, log, "standby slot")
			sb.standingBy(false)
		}
		if !elected {
			continue
		}
		leadAndRelease(ctx, lock, log, lfn)
		if ctx.Err() != nil {
			return nil
		}
		watch.Sleep(ctx, lock.LockTTL()/2)
	}
	return nil
}

// quiet returns a standby slot once this candidate holds one, or elected when it
// took the leader lock itself (nil and false when ctx ends). It tries every slot
// at once first (a candidate that starts, or that stops leading or standing by),
// then one at random per period. While the census counts fewer candidates than
// the shortest period holds intervals (fewer than 15 by default), or there is no
// census yet (no leader has published one), it contends for the leader lock as
// RunElected does: with few candidates that costs little, and a small cluster
// whose leader and standbys reboot at once is not left waiting for a quiet one.
func (sb Standbys) quiet(ctx context.Context, lock Lock, watchLock Watch, log *slog.Logger) (Lock, bool) {
	for _, s := range sb.Slots {
		if try(ctx, s, log) {
			return s, false
		}
	}
	log.Debug("coordinator election: every standby slot is taken")
	first := true
	for ctx.Err() == nil {
		n, err := bounded(ctx, lock.LockTTL(), sb.Census)
		if err != nil {
			log.Warn("coordinator election: read the candidate census", "err", err)
			n = 0
		}
		if time.Duration(n)*sb.Interval < sb.MinPeriod {
			if contend(ctx, lock, watchLock, 2*lock.LockTTL(), log) {
				return nil, true
			}
			continue
		}
		p := QuietPeriod(n, sb.Interval, sb.MinPeriod, sb.MaxPeriod)
		if !watch.Sleep(ctx, quietSleep(p, first)) {
			return nil, false
		}
		first = false
		s := sb.Slots[rand.N(len(sb.Slots))]
		if try(ctx, s, log) {
			return s, false
		}
	}
	return nil, false
}

// quietSleep is a quiet candidate's time to its next attempt: uniform in
// [p/2, 3p/2), so that attempts spread out and their mean period stays p; the
// first one uniform in [0, p), so that candidates that started together are
// spread out at once (at the rate of 1/p each, the steady one).
func quietSleep(p time.Duration, first bool) time.Duration {
	if first {
		return rand.N(p)
	}
	return p/2 + rand.N(p)
}

// standby holds slot and contends for lock until it is acquired (true), the slot
// is lost or ctx ends (false).
func standby(ctx context.Context, lock Lock, watchLock Watch, slot Lock, log *slog.Logger) bool {
	log.Info("coordinator election: standing by")
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	held := make(chan struct{})
	go func() {
		defer close(held)
		defer cancel()
		keep(sctx, slot, log)
	}()
	defer func() { cancel(); <-held }()
	for sctx.Err() == nil {
		if contend(sctx, lock, watchLock, watch.MaxWait, log) {
			return true
		}
	}
	return false
}

// keep renews slot every TTL/2 until ctx ends or a renewal fails. A lost slot
// only costs liveness: Nomad frees it 2×TTL + lock delay after the last renewal.
func keep(ctx context.Context, slot Lock, log *slog.Logger) {
	ttl := slot.LockTTL()
	t := time.NewTicker(ttl / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, ttl/2)
			err := slot.Renew(rctx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("coordinator election: standby slot lost", "err", err)
				}
				return
			}
		}
	}
}

// try attempts slot once, bounded by its TTL.
func try(ctx context.Context, slot Lock, log *slog.Logger) bool {
	id, err := bounded(ctx, slot.LockTTL(), slot.Acquire)
	if err != nil && !errors.Is(err, api.ErrLockConflict) && ctx.Err() == nil {
		log.Warn("coordinator election: acquire a standby slot", "err", err)
	}
	return err == nil && id != ""
}

// releaseLock gives up l at once, even when ctx has ended.
func releaseLock(ctx context.Context, l Lock, log *slog.Logger, what string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.LockTTL()/2)
	defer cancel()
	if err := l.Release(rctx); err != nil && !errors.Is(err, api.ErrLockConflict) {
		log.Warn("coordinator election: release "+what, "err", err)
	}
}

// Census timing: the leader counts every censusSettle until two counts in a
// row agree (or censusSettleMax passes) and publishes that count, then counts
// again censusSettle later, the interval doubling up to CensusEvery, and
// publishes each change. A census taken while a new cluster's agents still
// register would make the quiet candidates that read it try too often for as
// long as the period it gave them.
const (
	censusSettle    = 15 * time.Second
	censusSettleMax = 2 * time.Minute
)

// publishLoop keeps the census while ctx (the lead) lasts; a failure is logged
// and retried at the next count.
func (sb Standbys) publishLoop(ctx context.Context, log *slog.Logger) {
	every := sb.CensusEvery
	if every <= 0 {
		every = DefaultCensusEvery
	}
	next, prev, published := censusSettle, -1, false
	start := time.Now()
	for ctx.Err() == nil {
		n, err := sb.Count(ctx)
		if err == nil && (published || n == prev || time.Since(start) >= censusSettleMax) {
			err = sb.Publish(ctx, n)
			published = published || err == nil
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("coordinator election: publish the candidate census", "err", err)
		}
		if err == nil {
			prev = n
		}
		if published {
			next = min(2*next, every)
		}
		if !watch.Sleep(ctx, next) {
			return
		}
	}
}

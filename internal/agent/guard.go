package agent

import (
	"context"
	"errors"
	"time"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watch"
)

// Any holder of an agent token can write every host's record (Nomad cannot scope
// a policy to one path per host). So an agent watches its own record with a
// blocking query and restores what it last wrote when someone else changed it.

// recordChange is what the watch saw of the agent's own record.
type recordChange struct {
	rec     store.HostRecord
	index   uint64 // ModifyIndex; 0 when the record is gone
	decoded bool
	// behind: the record is gone at an index of Nomad's behind the one the
	// watch asked from (the agent's last write, or its record file's).
	behind uint64
}

// watchRecord follows this host's record with blocking queries and offers every
// version it sees to the loop, a deleted or garbled one included. A missing record
// with nothing to block on is looked for again every PollEvery. from is the
// index of the record as the agent last read or wrote it (0: none): the watch
// starts past it, since reading the agent's own write back tells it nothing
// (two requests per start: the first read, and the answer to the start's write).
// A record gone at an index of Nomad's behind the one asked from is offered
// too: no deletion in Nomad lowers its index, so its state went back (a
// snapshot restored, a cluster built anew under the agent's record file), and
// waiting for its index to pass the agent's would leave the host without a
// record until then.
func (a *Agent) watchRecord(ctx context.Context, out chan recordChange, from uint64) {
	var seen recordChange
	watch.Loop{
		Index: from,
		Query: func(ctx context.Context, idx uint64) (uint64, error) {
			if a.guardHeld.Load() {
				select {
				case <-a.guardResume:
				case <-ctx.Done():
					return idx, ctx.Err()
				}
			}
			rec, n, err := a.opt.Store.WatchHost(ctx, a.opt.Host, idx, a.opt.WatchWait)
			gone := errors.Is(err, store.ErrNotFound)
			switch {
			case err != nil && !gone && rec.ModifyIndex == 0:
				return 0, err // a garbled record has an index: it is a version seen
			case n == idx && n != 0:
				return idx, nil // the wait ran out with no change
			case gone && n < idx:
				seen = recordChange{behind: idx}
				return n, nil // the loop starts over from 0 (watch.Loop)
			case gone && n <= idx:
				watch.Sleep(ctx, a.opt.PollEvery)
				return idx, ctx.Err()
			}
			seen = recordChange{rec: rec, index: rec.ModifyIndex, decoded: err == nil}
			return n, nil
		},
		OnChange: func(uint64) { offerNewest(out, seen) },
		Retry:    watchRetry,
		OnError:  a.watchFailed("watch host record"),
	}.Run(ctx)
}

// restoreRecord puts back what this agent last wrote when its record was changed
// (or deleted) by someone else. It runs in the agent's loop, which owns a.rec
// (or in a reboot attempt the loop is running: sleepRestoring).
func (a *Agent) restoreRecord(ctx context.Context, ch recordChange) {
	if !a.published || (ch.index != 0 && ch.index <= a.rec.ModifyIndex) {
		return // not written yet, or our own write (or an older version of it)
	}
	if ch.decoded && ch.index != 0 && ch.rec.Equal(a.last) {
		a.rec.ModifyIndex = ch.index // same content (another incarnation of us)
		a.last.ModifyIndex = ch.index
		return
	}
	if ch.behind != 0 {
		a.log.Warn("host record gone from Nomad at an index behind the agent's last write (Nomad's state went back: a snapshot restored?); writing it again",
			"last_write_index", ch.behind)
	} else {
		a.log.Warn("host record changed by someone else; restoring it", "modify_index", ch.index, "decoded", ch.decoded)
	}
	a.rec.ModifyIndex = ch.index
	a.published = false // publish writes even though a.rec equals a.last
	if err := a.publish(ctx); err != nil {
		a.log.Warn("restore host record", "err", err)
	}
}

// sleepRestoring waits d, or until ctx ends (false), restoring the record
// meanwhile when someone else changes it. A reboot attempt runs in the loop and
// may wait minutes (a hold, the delay, the host going down): a record forged
// then would otherwise stand until the attempt ends.
func (a *Agent) sleepRestoring(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case ch := <-a.changes:
			a.restoreRecord(ctx, ch)
		}
	}
}

// holdGuard has the record's watch ask no more once its query under way
// answers, until resumeGuard: a reboot attempt with nothing to run before the
// reboot (checkedOnce) holds it before it announces the reboot, since the
// query after the announcement's answer would only be cut by the reboot (a
// request per reboot). The attempt resumes it when its go/no-go holds (a
// forged record is then restored as the reboot waits) and when it ends
// without the host going down. A record forged while the host goes down is
// restored only if the host does not go down, once the attempt ends (at most
// DownTimeout): the coordinator takes a record as a claim, and decides the
// reboot from Nomad's word, so what the guard protects is the host's say, not
// a decision.
func (a *Agent) holdGuard() {
	select {
	case <-a.guardResume: // a resume it did not wait for
	default:
	}
	a.guardHeld.Store(true)
}

// resumeGuard lets the record's watch ask again (holdGuard).
func (a *Agent) resumeGuard() {
	if a.guardHeld.Swap(false) {
		select {
		case a.guardResume <- struct{}{}:
		default:
		}
	}
}

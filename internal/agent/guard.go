package agent

import (
	"context"
	"errors"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Any holder of an agent token can write every host's record (Nomad cannot scope
// a policy to one path per host). So an agent watches its own record with a
// blocking query and restores what it last wrote when someone else changed it.

// recordChange is what the watch saw of the agent's own record.
type recordChange struct {
	rec     store.HostRecord
	index   uint64 // ModifyIndex; 0 when the record is gone
	decoded bool
}

// watchRecord follows this host's record and sends every version it sees.
func (a *Agent) watchRecord(ctx context.Context, out chan recordChange) {
	var idx uint64
	fails := 0
	for ctx.Err() == nil {
		rec, n, err := a.opt.Store.WatchHost(ctx, a.opt.Host, idx, 5*time.Minute)
		gone := errors.Is(err, store.ErrNotFound)
		if err != nil && !gone && rec.ModifyIndex == 0 {
			fails++
			if !wait(ctx, policy.Backoff(200*time.Millisecond, 10*time.Second, fails)) {
				return
			}
			idx = 0
			continue
		}
		fails = 0
		if n == idx && n != 0 {
			continue // the wait ran out with no change
		}
		if gone && n <= idx {
			if !wait(ctx, a.opt.PollEvery) {
				return
			}
			continue
		}
		idx = n
		ch := recordChange{rec: rec, index: rec.ModifyIndex, decoded: err == nil}
		select {
		case out <- ch:
		case <-ctx.Done():
			return
		default:
			select { // replace a version the loop has not taken yet
			case <-out:
			default:
			}
			out <- ch
		}
	}
}

// restoreRecord puts back what this agent last wrote when its record was changed
// (or deleted) by someone else. It runs in the agent's loop, which owns a.rec.
func (a *Agent) restoreRecord(ctx context.Context, ch recordChange) {
	if !a.published || (ch.index != 0 && ch.index <= a.rec.ModifyIndex) {
		return // not written yet, or our own write (or an older version of it)
	}
	if ch.decoded && ch.index != 0 && ch.rec.Equal(a.last) {
		a.rec.ModifyIndex = ch.index // same content (another incarnation of us)
		a.last.ModifyIndex = ch.index
		return
	}
	a.log.Warn("host record changed by someone else; restoring it", "modify_index", ch.index, "decoded", ch.decoded)
	a.rec.ModifyIndex = ch.index
	a.published = false // publish writes even though a.rec equals a.last
	if err := a.publish(ctx); err != nil {
		a.log.Warn("restore host record", "err", err)
	}
}

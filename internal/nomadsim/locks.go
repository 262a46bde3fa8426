package nomadsim

// Variable locks (Nomad >= 1.7): PUT /v1/var/<path>?lock-acquire|lock-release|lock-renew
// (command/agent/variable_endpoint.go), Variables.Apply / Variables.RenewLock
// (nomad/variables_endpoint.go), VarLockAcquire / VarLockRelease
// (nomad/state/state_store_variables.go) and the leader's TTL timers (nomad/locks.go).
//
// Time: the emulator does not scale lock durations. The api client renews every
// 0.7×TTL and retries acquisition every 1.1×TTL using the TTL it sent itself
// (api/locks.go NewLockLeaser), so a server-side scale factor would make the client
// renew far too late (or too early) and break the protocol under test. Instead
// Config.AllowShortLockTTL lowers Nomad's 10s minimum TTL, so tests ask for e.g.
// TTL=100ms and LockDelay=50ms, and client and server agree on every duration.

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// lockOperation is getLockOperation: at most one of lock-renew, lock-acquire and
// lock-release (the parameters need no value).
func lockOperation(q url.Values) (string, error) {
	_, renew := q[opLockRenew]
	_, acquire := q[opLockAcquire]
	_, release := q[opLockRelease]
	n := 0
	for _, b := range []bool{renew, acquire, release} {
		if b {
			n++
		}
	}
	switch {
	case n == 0:
		return "", nil
	case n > 1:
		return "", errors.New("multiple lock operations")
	case renew:
		return opLockRenew, nil
	case acquire:
		return opLockAcquire, nil
	}
	return opLockRelease, nil
}

// validateForLock is structs.VariableDecrypted.ValidateForLock: Items are optional.
func validateForLock(s *Sim, ns, p string, items map[string]string, lock *varLock) string {
	if ns == "*" {
		return multiError(`can not target wildcard ("*")namespace`)
	}
	if itemsSize(items) > maxVariableSize {
		return "variables are limited to 64KiB in total size"
	}
	if msg := validateVarPath(p); msg != "" {
		return msg
	}
	return lock.validate(s)
}

// varLockOperation answers ?lock-acquire and ?lock-release (variableLockOperation).
func (s *Sim) varLockOperation(w http.ResponseWriter, r *http.Request, p, op string) {
	var in inVar
	if err := decodeVarBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	in.Path = p
	s.varApply(r, op, &in, 0).write(w)
}

// lockAcquireTxn is VarLockAcquire: a lock held under another ID conflicts with a
// zero value; otherwise the variable is written (created if absent) with the
// request's Items — it overwrites the data — and the lock.
func (v *varState) lockAcquireTxn(k varKey, items map[string]string, lock *varLock, idx uint64, now int64) (*simVar, *simVar) {
	if ex := v.vars[k]; ex != nil && isLocked(ex.lock, lock) {
		return nil, zeroConflict(k)
	}
	return v.setTxn(k, items, lock, idx, now)
}

// lockReleaseTxn is VarLockRelease: the lock is cleared and ModifyIndex moves (the
// Items and ModifyTime stay). A nil request lock (the TTL expiry) skips the ID check.
// A wrong ID conflicts with a zero value that carries an empty lock.
func (v *varState) lockReleaseTxn(k varKey, req *varLock, idx uint64) (*simVar, *simVar, error) {
	ex := v.vars[k]
	if ex == nil {
		return nil, nil, errVarNotFoundState
	}
	if ex.lock == nil || ex.lock.id == "" {
		return nil, nil, errLockNotFoundState
	}
	if req != nil && ex.lock.id != req.id {
		c := zeroConflict(k)
		c.lock = &varLock{}
		return nil, c, nil
	}
	nv := ex.copy()
	nv.lock = nil
	nv.modifyIndex = idx
	v.put(k, nv)
	v.tableIndex = idx
	v.topics.varWrittenLocked(k)
	return nv.copy(), nil, nil
}

// varLockRenew answers ?lock-renew (variableLockRenew → Variables.RenewLock). It is
// no Raft write: it only resets the leader's timer, answers the stored metadata with
// its lock, and sets no index header.
func (s *Sim) varLockRenew(w http.ResponseWriter, r *http.Request, p string) {
	var in inVar
	if err := decodeVarBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	lockID := ""
	if in.Lock != nil {
		lockID = in.Lock.ID
	}
	res := func() varResult {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.servers.leaderLocked() == "" {
			return varResult{err: errNoLeader}
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return varResult{err: err}
		}
		ns := requestNamespace(r)
		if !tok.AllowVariable(ns, p, "write") {
			return varResult{err: errPermissionDenied}
		}
		if lockID == "" {
			// VariablesRenewLockRequest.Validate returns a plain multierror: 500.
			return varResult{err: errors.New(multiError("missing lock ID"))}
		}
		ex := s.vars.vars[varKey{ns, p}]
		switch {
		case ex == nil:
			return varResult{err: simhttp.Code(http.StatusNotFound, "variable doesn't exist")}
		case ex.lock == nil:
			return varResult{err: simhttp.Code(http.StatusConflict, "variable doesn't hold a lock")}
		case ex.lock.id != lockID:
			return varResult{err: simhttp.Code(http.StatusConflict, "attempting to modify locked variable")}
		}
		// The lock is still on the variable but its timer fired: it is in its
		// LockDelay and cannot be renewed any more.
		if !s.vars.renewTimerLocked(s, ex) {
			return varResult{err: simhttp.Code(http.StatusConflict, "attempting to modify locked variable")}
		}
		return varResult{code: http.StatusOK, body: ex.metaJSON()}
	}()
	res.write(w)
}

// ---- TTL timers (nomad/locks.go) -------------------------------------------------

// lockTimer is one entry of the leader's lockTTLTimer.
type lockTimer struct {
	key varKey
	// delay is the LockDelay of the variable as it was when the timer was created
	// (CreateVariableLockTTLTimer captures the variable).
	delay time.Duration
	gen   uint64
}

// createTimerLocked is CreateVariableLockTTLTimer: a timer of 2×TTL; an existing
// timer for the same lock ID is left alone.
func (v *varState) createTimerLocked(s *Sim, sv *simVar) {
	if sv == nil || sv.lock == nil {
		return
	}
	id := sv.lock.id
	if _, ok := v.timers[id]; ok {
		return
	}
	t := &lockTimer{key: varKey{sv.ns, sv.path}, delay: sv.lock.delay}
	v.timers[id] = t
	v.armLocked(s, id, t, 2*sv.lock.ttl)
}

// renewTimerLocked is RenewTTLTimer: resets the timer to 2×(stored TTL); false when
// the timer no longer exists.
func (v *varState) renewTimerLocked(s *Sim, sv *simVar) bool {
	t, ok := v.timers[sv.lock.id]
	if !ok {
		return false
	}
	v.armLocked(s, sv.lock.id, t, 2*sv.lock.ttl)
	return true
}

// removeTimerLocked is RemoveVariableLockTTLTimer. A release that is already in its
// LockDelay is not stopped (nor is it in Nomad).
func (v *varState) removeTimerLocked(id string) { delete(v.timers, id) }

// armLocked (re)starts t. When it fires it is removed (renewals now fail) and, after
// the LockDelay, the lock is released without an ID check.
func (v *varState) armLocked(s *Sim, id string, t *lockTimer, d time.Duration) {
	t.gen++
	gen, epoch := t.gen, v.epoch
	s.after(d, func() {
		if v.epoch != epoch || v.timers[id] != t || t.gen != gen {
			return
		}
		delete(v.timers, id)
		s.after(t.delay, func() {
			if v.epoch != epoch {
				return // leadership changed: the old leader's apply fails
			}
			v.invalidateLocked(s, t.key, id)
		})
	})
}

// invalidateLocked is invalidateVariableLock: a Raft apply of a lock release with no
// lock in the request, so whatever lock the variable holds now is cleared.
func (v *varState) invalidateLocked(s *Sim, k varKey, expiredID string) {
	idx := s.bumpLocked()
	holder := ""
	if ex := v.vars[k]; ex != nil && ex.lock != nil {
		holder = ex.lock.id
	}
	if _, _, err := v.lockReleaseTxn(k, nil, idx); err != nil {
		return // deleted or already unlocked: the apply fails, nothing changes
	}
	d := map[string]string{"namespace": k.ns, "path": k.path, "lock_id": holder,
		"reason": "expired", "index": strconv.FormatUint(idx, 10)}
	if holder != expiredID {
		d["expired_lock_id"] = expiredID
	}
	s.eventLocked(Event{Type: EventLockRelease, Details: d})
}

// leaderChangedLocked drops every timer and pending delayed release of the old
// leader; a new leader rebuilds a full 2×TTL timer for every locked variable
// (leader.go establishLeadership → restoreLockTTLTimers).
func (v *varState) leaderChangedLocked(s *Sim, haveLeader bool) {
	v.epoch++
	v.timers = map[string]*lockTimer{}
	if !haveLeader {
		return
	}
	for _, sv := range v.vars {
		if sv.lock != nil {
			v.createTimerLocked(s, sv)
		}
	}
}

package fleetlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// collector remembers since when each record the server wrote has had nothing
// behind it (no node with its id, no allow-list entry).
type collector struct {
	mu       sync.Mutex
	unbacked map[string]time.Time
}

// Backed says whether a record the FleetLock server wrote is still backed: by a
// node whose meta fleetlock_id is the record's id (byID maps ids to node names),
// or, for a holder without a node, by the allow-list.
func Backed(rec store.HostRecord, byID map[string]string, allowed map[string]bool) bool {
	if rec.NodeID != "" {
		return byID[rec.FleetLockID] == rec.Host
	}
	return allowed[rec.FleetLockID] && rec.Host == HostPrefix+rec.FleetLockID
}

// Stale picks the records to delete at now: written by the FleetLock server, not
// backed, holding no slot, and unbacked for at least grace (since is updated:
// when each record was first seen unbacked; backed records are forgotten).
func Stale(recs []store.HostRecord, plans map[string]store.Plan, byID map[string]string, allowed map[string]bool,
	since map[string]time.Time, now time.Time, grace time.Duration) []store.HostRecord {
	var out []store.HostRecord
	seen := map[string]bool{}
	for _, r := range recs {
		if !isOwned(r) {
			continue
		}
		seen[r.Host] = true
		if Backed(r, byID, allowed) {
			delete(since, r.Host)
			continue
		}
		first, ok := since[r.Host]
		if !ok {
			since[r.Host] = now
			first = now
		}
		if now.Sub(first) >= grace && !plans[r.Host].Active() {
			out = append(out, r)
		}
	}
	for h := range since {
		if !seen[h] {
			delete(since, h)
		}
	}
	return out
}

// Collect deletes the host records the server wrote that nothing has backed for
// RecordGrace (a node lost its fleetlock_id meta or left, an id left the
// allow-list), with their FleetLock requests, so that state stays bounded. A
// record whose host holds a slot is kept until the cycle ends. It returns the
// hosts deleted.
func (s *Server) Collect(ctx context.Context) ([]string, error) {
	hosts, _, err := s.opt.Store.Hosts(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	byID := map[string]string{}
	for _, h := range hosts {
		if !isOwned(h) || h.NodeID == "" || s.opt.Nodes == nil {
			continue
		}
		n, a, err := s.nodeOf(ctx, h.FleetLockID)
		switch {
		case err != nil:
			return nil, err
		case a.kind != "":
			byID[h.FleetLockID] = h.Host // several nodes: not for the clean-up to decide
		case n != nil:
			byID[h.FleetLockID] = n.Name
		}
	}
	plans := map[string]store.Plan{}
	for _, h := range hosts {
		if isOwned(h) && !Backed(h, byID, s.allowed) {
			p, err := s.plan(ctx, h.Host)
			if err != nil {
				return nil, err
			}
			plans[h.Host] = p
		}
	}
	s.gc.mu.Lock()
	if s.gc.unbacked == nil {
		s.gc.unbacked = map[string]time.Time{}
	}
	stale := Stale(hosts, plans, byID, s.allowed, s.gc.unbacked, s.now(), s.opt.RecordGrace)
	s.gc.mu.Unlock()
	var deleted []string
	for _, r := range stale {
		if _, err := s.withdraw(ctx, identity{host: r.Host, owned: true}); err != nil {
			return deleted, err
		}
		if err := s.opt.Store.DeleteHost(ctx, r); err != nil {
			if errors.Is(err, store.ErrConflict) {
				continue // written since: looked at again next time
			}
			return deleted, err
		}
		s.log.Info("deleted a FleetLock host record nothing backs", "host", r.Host, "fleetlock_id", r.FleetLockID)
		deleted = append(deleted, r.Host)
	}
	return deleted, nil
}

// RunCollector calls Collect every interval until ctx ends.
func (s *Server) RunCollector(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Collect(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("FleetLock record clean-up failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

package fleetlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// HostPrefix starts the name of a FleetLock slot holder without a Nomad node.
const HostPrefix = "fleetlock-"

// RequestBy marks the manual requests the FleetLock server writes: "fleetlock:<id>".
const RequestBy = "fleetlock:"

// RequestReason is the reason of a FleetLock reboot request.
const RequestReason = "FleetLock pre-reboot"

// isOwned: the record was written by the FleetLock server (it has the role and
// no agent version).
func isOwned(h store.HostRecord) bool {
	return slices.Contains(h.Roles, store.RoleFleetLock) && h.AgentVersion == ""
}

// syncRecord creates or updates the FleetLock-written record of an owned identity
// (roles, id, node, group); the group changes only while no slot is held.
func (s *Server) syncRecord(ctx context.Context, ident *identity, id, group string, plan store.Plan) error {
	var rec store.HostRecord
	if ident.rec != nil {
		rec = *ident.rec
	} else {
		rec = store.HostRecord{Host: ident.host, Hostname: ident.host}
	}
	want := rec
	// The server's own record: what it knows, whatever another writer left
	// there (no agent version, the node it resolved or none).
	want.FleetLockID, want.NodeID, want.AgentVersion = id, ident.nodeID, ""
	want.Roles = []string{store.RoleFleetLock}
	if ident.nodeID != "" {
		want.Roles = append(want.Roles, store.RoleNomadClient)
	}
	if !plan.Active() || want.Group == "" {
		want.Group = group
	}
	if ident.rec != nil && rec.Equal(want) {
		return nil
	}
	return s.putRecord(ctx, ident, want)
}

func (s *Server) putRecord(ctx context.Context, ident *identity, rec store.HostRecord) error {
	idx, err := s.opt.Store.PutHost(ctx, rec)
	if err != nil {
		return err
	}
	rec.ModifyIndex = idx
	ident.rec = &rec
	return nil
}

func (s *Server) plan(ctx context.Context, host string) (store.Plan, error) {
	p, err := s.opt.Store.Plan(ctx, host)
	if errors.Is(err, store.ErrNotFound) {
		return store.Plan{Host: host, Phase: store.PhaseIdle}, nil
	}
	return p, err
}

// prepare resolves the id to its host, reads the host's plan and, for a record the
// server owns, brings the record up to date. A non-empty answer kind ends the call.
func (s *Server) prepare(ctx context.Context, id, group string) (identity, store.Plan, answer, error) {
	ident, known, a, err := s.resolve(ctx, id)
	ident.known = known
	if err != nil || a.kind != "" {
		return ident, store.Plan{}, a, err
	}
	p, err := s.plan(ctx, ident.host)
	if err != nil {
		return ident, p, ok200, err
	}
	if ident.owned {
		if err := s.syncRecord(ctx, &ident, id, group, p); err != nil {
			return ident, p, ok200, err
		}
	}
	return ident, p, ok200, nil
}

// scrub keeps other hosts' names out of an answer: the client may learn about
// its own host, not about the fleet.
func scrub(a answer, ident identity) answer {
	for _, n := range ident.known {
		if n != ident.host && n != "" && strings.Contains(a.value, n) {
			a.value = replaceName(a.value, n)
		}
	}
	return a
}

// replaceName replaces whole-word occurrences of name with "another host".
func replaceName(text, name string) string {
	var b strings.Builder
	for {
		i := strings.Index(text, name)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		before, after := i == 0 || !isNameChar(text[i-1]), endsName(text[i+len(name):])
		b.WriteString(text[:i])
		if before && after {
			b.WriteString("another host")
		} else {
			b.WriteString(name)
		}
		text = text[i+len(name):]
	}
}

// endsName: a name is complete before rest (a dot ending a sentence does not
// continue it).
func endsName(rest string) bool {
	switch {
	case rest == "" || !isNameChar(rest[0]):
		return true
	case rest[0] == '.':
		return len(rest) == 1 || !isNameChar(rest[1])
	}
	return false
}

func isNameChar(c byte) bool {
	return c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// preReboot is RecursiveLock: 200 once the host holds a slot and its node is
// drained; otherwise the need is recorded and the answer says what it waits for.
func (s *Server) preReboot(ctx context.Context, id, group string) (res answer, err error) {
	ident, p, a, err := s.prepare(ctx, id, group)
	defer func() { res = scrub(res, ident) }()
	if err != nil || a.kind != "" {
		return a, err
	}
	switch p.Phase {
	case store.PhaseDrained, store.PhaseRebooting:
		if p.GrantID == "" {
			return fail(KindInternal, "plan of "+ident.host+" is "+p.Phase+" without a grant"), nil
		}
		if ident.owned && ident.rec.RebootingGrant != p.GrantID {
			// Tells the coordinator the reboot begins (drained -> rebooting),
			// and tells a later steady-state that the client was told it may.
			rec := *ident.rec
			rec.RebootingGrant = p.GrantID
			if err := s.putRecord(ctx, &ident, rec); err != nil {
				return ok200, err
			}
		}
		return ok200, nil
	case store.PhaseDraining:
		return fail(KindWaitingForDrain, orText(p.Waiting, "draining")+" (host "+ident.host+")"), nil
	case store.PhaseRejoining:
		return fail(KindWaitingForRejoin, "the previous reboot of "+ident.host+" is finishing: "+orText(p.Waiting, "rejoining")), nil
	case store.PhaseStuck:
		return fail(KindStuck, "the reboot cycle of "+ident.host+" is stuck: "+p.LastError+" (rollboot release "+ident.host+" frees the slot)"), nil
	}
	// idle, pending, backoff: make sure the reboot is asked for.
	full, err := s.request(ctx, ident, id, group)
	if err != nil {
		return ok200, err
	}
	if full {
		return fail(KindWaitingForSlot, fmt.Sprintf("group %s already has %d slots held or asked for by hosts without a Nomad node (fleetlock.max_nodeless_slots) (host %s)",
			group, s.opt.MaxNodelessSlots, ident.host)), nil
	}
	why := "queued for a slot in group " + group
	switch {
	case p.Phase == store.PhasePending && p.Waiting != "":
		why = p.Waiting
	case p.Phase == store.PhaseBackoff && p.LastError != "":
		why = "backing off after: " + p.LastError
	}
	return fail(KindWaitingForSlot, why+" (host "+ident.host+")"), nil
}

// nodeless: the host is a slot holder without a Nomad node.
func (ident identity) nodeless() bool { return ident.owned && ident.nodeID == "" }

// request writes a manual reboot request for host unless one exists. The
// coordinator clears it when the cycle ends or is released by hand. For a host
// without a node it writes none, and reports full, when its group already has
// max_nodeless_slots such hosts holding or asking for a slot.
func (s *Server) request(ctx context.Context, ident identity, id, group string) (full bool, err error) {
	ctl, err := s.opt.Store.Control(ctx)
	if err != nil {
		return false, err
	}
	if _, ok := ctl.Requests[ident.host]; ok {
		return false, nil
	}
	var busy map[string]bool     // nodeless hosts of the group holding a slot
	var groups map[string]string // the group of every nodeless host
	if ident.nodeless() {
		if busy, groups, err = s.nodelessHolders(ctx, group); err != nil {
			return false, err
		}
	}
	_, err = s.opt.Store.UpdateControl(ctx, func(c *store.Control) error {
		full = false
		if _, ok := c.Requests[ident.host]; ok {
			return nil
		}
		if ident.nodeless() && NodelessFull(ident.host, group, busy, c.Requests, groups, s.opt.MaxNodelessSlots) {
			full = true
			return nil
		}
		if c.Requests == nil {
			c.Requests = map[string]store.Request{}
		}
		c.Requests[ident.host] = store.Request{At: s.now().UTC(), By: RequestBy + id, Reason: RequestReason}
		return nil
	})
	return full, err
}

// nodelessHolders returns the hosts without a node whose plan holds a slot in
// group, and the group of every host without a node.
func (s *Server) nodelessHolders(ctx context.Context, group string) (map[string]bool, map[string]string, error) {
	hosts, _, err := s.opt.Store.Hosts(ctx, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	busy := map[string]bool{}
	groups := map[string]string{}
	for _, h := range hosts {
		if !isOwned(h) || h.NodeID != "" {
			continue
		}
		groups[h.Host] = h.Group
		if h.Group != group {
			continue
		}
		p, err := s.plan(ctx, h.Host)
		if err != nil {
			return nil, nil, err
		}
		if p.Active() {
			busy[h.Host] = true
		}
	}
	return busy, groups, nil
}

// NodelessFull decides whether host (without a node) may ask for a slot in
// group: no, when max hosts without a node other than it already hold one there
// (busy) or asked for one (a request for a nodeless host of that group).
func NodelessFull(host, group string, busy map[string]bool, requests map[string]store.Request, groups map[string]string, max int) bool {
	n := 0
	for h := range busy {
		if h != host {
			n++
		}
	}
	for h := range requests {
		if h != host && !busy[h] && strings.HasPrefix(h, HostPrefix) && groups[h] == group {
			n++
		}
	}
	return n >= max
}

// withdraw removes the host's request: any request for a host without an agent
// (nothing else can reboot it), only the FleetLock server's own otherwise.
func (s *Server) withdraw(ctx context.Context, ident identity) (bool, error) {
	ctl, err := s.opt.Store.Control(ctx)
	if err != nil {
		return false, err
	}
	mine := func(c store.Control) bool {
		r, ok := c.Requests[ident.host]
		return ok && (ident.owned || strings.HasPrefix(r.By, RequestBy))
	}
	if !mine(ctl) {
		return false, nil
	}
	_, err = s.opt.Store.UpdateControl(ctx, func(c *store.Control) error {
		if mine(*c) {
			delete(c.Requests, ident.host)
		}
		return nil
	})
	return err == nil, err
}

// steadyState is UnlockIfHeld: 200 when the host holds no slot. When it holds one,
// what happens depends on whether the host rebooted (see steadyHeld).
func (s *Server) steadyState(ctx context.Context, id, group string) (res answer, err error) {
	ident, p, a, err := s.prepare(ctx, id, group)
	defer func() { res = scrub(res, ident) }()
	if err != nil || a.kind != "" {
		return a, err
	}
	switch p.Phase {
	case store.PhaseIdle, store.PhasePending, store.PhaseBackoff, "":
		// No slot held: withdraw a stale request; the lock is not held.
		withdrawn, err := s.withdraw(ctx, ident)
		if err != nil {
			return ok200, err
		}
		if ident.owned && ident.rec.RebootRequired {
			rec := *ident.rec
			rec.RebootRequired, rec.Reason = false, ""
			if err := s.putRecord(ctx, &ident, rec); err != nil {
				return ok200, err
			}
		}
		if withdrawn && ident.nodeless() {
			// A coordinator that read the request before it was withdrawn may
			// still grant it. A host with a node is then drained and, with no
			// request left, the drain is undone. A host without a node is
			// granted at once (drained), and the client, told it holds no
			// slot, will not reboot for it: a release asked now ends such a
			// grant as rollboot release does (no reboot recorded); with no
			// grant it is moot and the coordinator drops it.
			if err := s.releaseSlot(ctx, ident.host, p); err != nil {
				return ok200, err
			}
		}
		return ok200, nil
	case store.PhaseDraining:
		// The client is steady, not rebooting: withdraw the request, and the
		// coordinator undoes the drain.
		if _, err := s.withdraw(ctx, ident); err != nil {
			return ok200, err
		}
		return fail(KindWaitingForRejoin, "undoing the drain of "+ident.host), nil
	}
	return s.steadyHeld(ctx, ident, p)
}

// steadyHeld answers steady-state for a host holding a slot (drained, rebooting,
// rejoining, stuck):
//   - the client was never told it may reboot (no 200 for this grant): it did not
//     reboot and will not for this grant. The slot is released by hand (the drain
//     undone, eligibility restored), and no reboot is recorded;
//   - it was told, and its node shows no reboot yet (Nomad has not seen the node
//     go down and register again): the reboot may still come, so nothing is given
//     back: the slot stays held and the node ineligible until Nomad sees the
//     reboot (or rejoin_timeout turns the cycle stuck);
//   - otherwise the host is back: that is recorded and the coordinator finishes
//     the cycle (node ready, eligibility restored).
func (s *Server) steadyHeld(ctx context.Context, ident identity, p store.Plan) (answer, error) {
	told := ident.rec != nil && ident.rec.RebootingGrant == p.GrantID && p.GrantID != ""
	// The coordinator saw the reboot (the node registered again, or the client
	// reported back from its grant) when the cycle reached rejoining.
	seen := p.Phase == store.PhaseRejoining || p.Phase == store.PhaseStuck && !p.Timeline[store.PhaseRejoining].IsZero()
	if ident.owned && !told && !seen && (p.Phase == store.PhaseDrained || p.Phase == store.PhaseStuck) {
		if _, err := s.withdraw(ctx, ident); err != nil {
			return ok200, err
		}
		if err := s.releaseSlot(ctx, ident.host, p); err != nil {
			return ok200, err
		}
		return fail(KindWaitingForRejoin, "the client did not reboot: releasing the slot of "+ident.host+" and undoing its drain"), nil
	}
	if ident.owned && ident.nodeID != "" && !seen {
		why := "the node of " + ident.host + " has not rebooted yet as Nomad sees it: its slot stays held and the node ineligible until it does"
		if p.Phase == store.PhaseStuck {
			why = "the reboot cycle of " + ident.host + " is stuck: " + p.LastError + " (rollboot release " + ident.host + " frees the slot)"
		}
		return fail(KindWaitingForRejoin, why), nil
	}
	if ident.owned && p.GrantID != "" && (ident.rec.RebootedGrant != p.GrantID || ident.rec.RebootRequired) {
		// The client is back from the reboot of this grant: the server cannot
		// see its boot ID, so it records the grant it came back from, which
		// the coordinator takes as the reboot seen.
		rec := *ident.rec
		rec.RebootedGrant, rec.RebootRequired, rec.Reason = p.GrantID, false, ""
		if err := s.putRecord(ctx, &ident, rec); err != nil {
			return ok200, err
		}
	}
	why := orText(p.Waiting, p.Phase)
	if p.Phase == store.PhaseStuck && p.LastError != "" {
		why = "stuck: " + p.LastError
	}
	return fail(KindWaitingForRejoin, "the reboot cycle of "+ident.host+" is finishing: "+why), nil
}

// releaseSlot asks the coordinator to release the host's cycle, as `rollboot
// release` does: no reboot is recorded.
func (s *Server) releaseSlot(ctx context.Context, host string, p store.Plan) error {
	_, err := s.opt.Store.UpdateControl(ctx, func(c *store.Control) error {
		if at, ok := c.Releases[host]; ok && !at.Before(p.Timeline[store.PhasePending]) {
			return nil
		}
		if c.Releases == nil {
			c.Releases = map[string]time.Time{}
		}
		c.Releases[host] = s.now().UTC()
		return nil
	})
	return err
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

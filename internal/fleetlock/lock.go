package fleetlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// HostPrefix starts the name of a FleetLock slot holder without a Nomad node.
const HostPrefix = "fleetlock-"

// RequestBy marks the manual requests the FleetLock server writes: "fleetlock:<id>".
const RequestBy = "fleetlock:"

// RequestReason is the reason of a FleetLock reboot request.
const RequestReason = "FleetLock pre-reboot"

// SteadyBootPrefix starts the boot ID the server records in a FleetLock host's
// record when the client reports steady-state after its reboot.
const SteadyBootPrefix = "fleetlock-steady-"

// identity is the rollboot host a FleetLock id maps to.
type identity struct {
	host string
	// rec is the host's record as read; nil when it has none yet.
	rec *store.HostRecord
	// owned: the record is (or will be) written by the FleetLock server (no
	// agent runs there). Otherwise an agent writes it and the server never does.
	owned  bool
	nodeID string
}

// resolve maps an id to a host: (a) a host record carrying the id, (b) a Nomad
// node whose meta fleetlock_id is the id, (c) a slot holder "fleetlock-<id>".
func (s *Server) resolve(ctx context.Context, id string) (identity, answer, error) {
	hosts, _, err := s.opt.Store.Hosts(ctx, 0, 0)
	if err != nil {
		return identity{}, ok200, err
	}
	var agents, owned []store.HostRecord
	byName := map[string]store.HostRecord{}
	for _, h := range hosts {
		byName[h.Host] = h
		if h.FleetLockID != id {
			continue
		}
		if isOwned(h) {
			owned = append(owned, h)
		} else {
			agents = append(agents, h)
		}
	}
	switch {
	case len(agents) == 1:
		// An agent publishes the id: it writes the record, the server only asks.
		h := agents[0]
		return identity{host: h.Host, rec: &h, nodeID: h.NodeID}, ok200, nil
	case len(agents) > 1:
		return identity{}, conflict(id, agents), nil
	case len(owned) == 1:
		h := owned[0]
		return identity{host: h.Host, rec: &h, owned: true, nodeID: h.NodeID}, ok200, nil
	case len(owned) > 1:
		return identity{}, conflict(id, owned), nil
	}
	if s.opt.Nodes != nil {
		q := (&api.QueryOptions{Filter: "Meta." + NodeMetaKey + " == " + strconv.Quote(id)}).WithContext(ctx)
		nodes, _, err := s.opt.Nodes.List(q)
		if err != nil {
			return identity{}, ok200, fmt.Errorf("find the node of FleetLock id %s: %w", id, err)
		}
		switch {
		case len(nodes) > 1:
			names := make([]string, 0, len(nodes))
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			return identity{}, fail(KindIdentityConflict, "FleetLock id "+id+" is the meta "+NodeMetaKey+" of several nodes: "+strings.Join(names, ", ")), nil
		case len(nodes) == 1:
			n := nodes[0]
			if h, ok := byName[n.Name]; ok && !isOwned(h) {
				// An agent runs there but did not publish the id (no machine-id
				// file): it still writes the record.
				return identity{host: h.Host, rec: &h, nodeID: h.NodeID}, ok200, nil
			}
			return identity{host: n.Name, owned: true, nodeID: n.ID}, ok200, nil
		}
	}
	name := HostPrefix + id
	if h, ok := byName[name]; ok && !isOwned(h) {
		return identity{host: h.Host, rec: &h, nodeID: h.NodeID}, ok200, nil
	}
	return identity{host: name, owned: true}, ok200, nil
}

func conflict(id string, recs []store.HostRecord) answer {
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Host)
	}
	return fail(KindIdentityConflict, "FleetLock id "+id+" is published by several hosts: "+strings.Join(names, ", "))
}

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
	want.FleetLockID = id
	want.Roles = []string{store.RoleFleetLock}
	if ident.nodeID != "" {
		want.NodeID = ident.nodeID
		want.Roles = append(want.Roles, store.RoleNomadClient)
	}
	if !plan.Active() || want.Group == "" {
		want.Group = group
	}
	if ident.rec != nil && sameRecord(rec, want) {
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

func sameRecord(a, b store.HostRecord) bool {
	return a.FleetLockID == b.FleetLockID && a.NodeID == b.NodeID && a.Group == b.Group &&
		slices.Equal(a.Roles, b.Roles) && a.BootID == b.BootID && a.RebootingGrant == b.RebootingGrant &&
		a.RebootRequired == b.RebootRequired
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
	ident, a, err := s.resolve(ctx, id)
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

// preReboot is RecursiveLock: 200 once the host holds a slot and its node is
// drained; otherwise the need is recorded and the answer says what it waits for.
func (s *Server) preReboot(ctx context.Context, id, group string) (answer, error) {
	ident, p, a, err := s.prepare(ctx, id, group)
	if err != nil || a.kind != "" {
		return a, err
	}
	switch p.Phase {
	case store.PhaseDrained, store.PhaseRebooting:
		if p.GrantID == "" {
			return fail(KindInternal, "plan of "+ident.host+" is "+p.Phase+" without a grant"), nil
		}
		if ident.owned && ident.rec.RebootingGrant != p.GrantID {
			// Tells the coordinator the reboot begins (drained -> rebooting).
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
	if err := s.request(ctx, ident.host, id); err != nil {
		return ok200, err
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

// request writes a manual reboot request for host unless one exists. The
// coordinator clears it when the cycle ends or is released by hand.
func (s *Server) request(ctx context.Context, host, id string) error {
	ctl, err := s.opt.Store.Control(ctx)
	if err != nil {
		return err
	}
	if _, ok := ctl.Requests[host]; ok {
		return nil
	}
	_, err = s.opt.Store.UpdateControl(ctx, func(c *store.Control) error {
		if _, ok := c.Requests[host]; ok {
			return nil
		}
		if c.Requests == nil {
			c.Requests = map[string]store.Request{}
		}
		c.Requests[host] = store.Request{At: s.now().UTC(), By: RequestBy + id, Reason: RequestReason}
		return nil
	})
	return err
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
// the client is back from its reboot: that is recorded, and the answer is 200 only
// once the coordinator finished the cycle (node ready, eligibility restored).
func (s *Server) steadyState(ctx context.Context, id, group string) (answer, error) {
	ident, p, a, err := s.prepare(ctx, id, group)
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
		if ident.owned && (withdrawn || ident.rec.RebootRequired) {
			// A coordinator that read the request before it was withdrawn may
			// still grant it: a new boot ID (the client did start anew) ends
			// such a grant at once (drained -> rejoining -> idle).
			rec := *ident.rec
			rec.RebootRequired, rec.Reason = false, ""
			rec.BootID = SteadyBootPrefix + strconv.FormatInt(s.now().UnixNano(), 36)
			if err := s.putRecord(ctx, &ident, rec); err != nil {
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
	// drained, rebooting, rejoining, stuck: the host is back.
	if ident.owned && p.GrantID != "" {
		boot := SteadyBootPrefix + p.GrantID
		if ident.rec.BootID == p.BootIDAtGrant || ident.rec.RebootRequired {
			rec := *ident.rec
			rec.BootID, rec.RebootRequired, rec.Reason = boot, false, ""
			if err := s.putRecord(ctx, &ident, rec); err != nil {
				return ok200, err
			}
		}
	}
	why := orText(p.Waiting, p.Phase)
	if p.Phase == store.PhaseStuck && p.LastError != "" {
		why = "stuck: " + p.LastError
	}
	return fail(KindWaitingForRejoin, "the reboot cycle of "+ident.host+" is finishing: "+why), nil
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

package fleetlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// Which host a FleetLock id names (shared DESIGN.md, "Trust": a host speaks only
// for itself). The operator's sources come first: the meta fleetlock_id of a
// Nomad node and fleetlock.allowed_ids. A host record is a claim by whoever
// wrote it (the agent token can write any record under hosts/), so an id an
// agent published counts only when no operator's source names the id and the
// record names the Nomad node of its own host.

// identity is the rollboot host a FleetLock id maps to.
type identity struct {
	host string
	// rec is the host's record as read; nil when it has none yet.
	rec *store.HostRecord
	// owned: the record is (or will be) written by the FleetLock server (no
	// agent runs there). Otherwise an agent writes it and the server never does.
	owned  bool
	nodeID string
	// known are the names of every host with a record, kept out of answers.
	known []string
}

// Why a host record's published id is not counted: the reason label of
// rollboot_fleetlock_ignored_claims_total.
const (
	// ClaimOverridden: the node meta or the allow-list names the id, and the
	// record is not the host they name.
	ClaimOverridden = "operator_source"
	// ClaimUnverified: the record names no Nomad node, or not the node whose
	// name is the record's host.
	ClaimUnverified = "not_its_node"
)

var claimText = map[string]string{
	ClaimOverridden: "the node meta " + NodeMetaKey + " or fleetlock.allowed_ids names this id for another host",
	ClaimUnverified: "the record does not name the Nomad node of its host",
}

// resolve maps an id to a host, and returns the names of all known hosts so
// that answers can be kept from naming them. Any id nothing backs is refused
// and leaves no state.
func (s *Server) resolve(ctx context.Context, id string) (identity, []string, answer, error) {
	hosts, _, err := s.opt.Store.Hosts(ctx, 0, 0)
	if err != nil {
		return identity{}, nil, ok200, err
	}
	names := make([]string, 0, len(hosts))
	byName := make(map[string]store.HostRecord, len(hosts))
	var claims []store.HostRecord // records not written by the server that publish id
	for _, h := range hosts {
		byName[h.Host] = h
		names = append(names, h.Host)
		if h.FleetLockID == id && !isOwned(h) {
			claims = append(claims, h)
		}
	}
	ident, a, err := s.resolveIn(ctx, id, byName, claims)
	return ident, names, a, err
}

// resolveIn picks the host of id, first match wins: (a) the Nomad node whose
// meta fleetlock_id is the id, (b) an id of the allow-list, as a slot holder
// without a node "fleetlock-<id>", (c) the one host whose agent published the
// id in a record naming that host's own Nomad node. An id both (a) and (b) name
// is a conflict between two of the operator's sources: refused. A record that
// claims an id (a) or (b) names elsewhere is ignored, so that a request from
// that machine never drains, or frees a slot for, another host.
func (s *Server) resolveIn(ctx context.Context, id string, byName map[string]store.HostRecord, claims []store.HostRecord) (identity, answer, error) {
	var node *api.NodeListStub
	if s.opt.Nodes != nil {
		n, a, err := s.nodeOf(ctx, id)
		if err != nil || a.kind != "" {
			return identity{}, a, err
		}
		node = n
	}
	switch {
	case node != nil && s.allowed[id]:
		s.noteConflict(id, "the meta "+NodeMetaKey+" of node "+node.Name+" and in fleetlock.allowed_ids")
		return identity{}, conflict("both the meta " + NodeMetaKey + " of a node and in fleetlock.allowed_ids"), nil
	case node != nil:
		s.ignoreClaims(id, claims, node.Name, ClaimOverridden)
		return nodeIdentity(node, byName), ok200, nil
	case s.allowed[id]:
		s.ignoreClaims(id, claims, "", ClaimOverridden)
		name := HostPrefix + id
		ident := identity{host: name, owned: true}
		if h, ok := byName[name]; ok {
			ident.rec = &h // the server's name: its record, whoever wrote it last
		}
		return ident, ok200, nil
	}
	verified, err := s.verifiedClaims(ctx, id, claims)
	if err != nil {
		return identity{}, ok200, err
	}
	switch len(verified) {
	case 0:
		return identity{}, fail(KindUnknownID, "this FleetLock id is not known: set it as the meta "+NodeMetaKey+
			" of its Nomad node, or add it to fleetlock.allowed_ids"), nil
	case 1:
		// An agent publishes the id: it writes the record, the server only asks.
		h := verified[0]
		return identity{host: h.Host, rec: &h, nodeID: h.NodeID}, ok200, nil
	}
	s.noteConflict(id, "published by hosts "+strings.Join(hostNames(verified), ", "))
	return identity{}, conflict("published by several hosts"), nil
}

// nodeIdentity is the host of node n: an agent's when an agent wrote the
// record of n's name, else one the server writes.
func nodeIdentity(n *api.NodeListStub, byName map[string]store.HostRecord) identity {
	h, ok := byName[n.Name]
	switch {
	case ok && !isOwned(h):
		// An agent runs there: it writes the record, the server only asks.
		return identity{host: h.Host, rec: &h, nodeID: n.ID}
	case ok:
		return identity{host: n.Name, rec: &h, owned: true, nodeID: n.ID}
	}
	return identity{host: n.Name, owned: true, nodeID: n.ID}
}

// verifiedClaims keeps the claims whose record names the Nomad node whose name
// is the record's host (as the coordinator's ValidateRecords does); the others
// are ignored, and reported once.
func (s *Server) verifiedClaims(ctx context.Context, id string, claims []store.HostRecord) ([]store.HostRecord, error) {
	var ids []string
	for _, h := range claims {
		if h.NodeID != "" && !slices.Contains(ids, h.NodeID) {
			ids = append(ids, h.NodeID)
		}
	}
	nodes := map[string]*api.NodeListStub{}
	if len(ids) > 0 && s.opt.Nodes != nil {
		var err error
		if nodes, err = s.nodesByID(ctx, ids); err != nil {
			return nil, err
		}
	}
	var ok []store.HostRecord
	for _, h := range claims {
		if n := nodes[h.NodeID]; h.NodeID != "" && n != nil && n.Name == h.Host {
			ok = append(ok, h)
			continue
		}
		s.ignoreClaim(id, h.Host, ClaimUnverified)
	}
	return ok, nil
}

// nodesByID lists the Nomad nodes of the given IDs, by ID.
func (s *Server) nodesByID(ctx context.Context, ids []string) (map[string]*api.NodeListStub, error) {
	terms := make([]string, 0, len(ids))
	for _, id := range ids {
		terms = append(terms, "ID == "+strconv.Quote(id))
	}
	q := (&api.QueryOptions{Filter: strings.Join(terms, " or ")}).WithContext(ctx)
	list, _, err := s.opt.Nodes.List(q)
	if err != nil {
		return nil, fmt.Errorf("read the nodes of host records: %w", err)
	}
	out := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		out[n.ID] = n
	}
	return out, nil
}

// nodeOf finds the node whose meta fleetlock_id is id; nil when none.
func (s *Server) nodeOf(ctx context.Context, id string) (*api.NodeListStub, answer, error) {
	q := (&api.QueryOptions{Filter: "Meta." + NodeMetaKey + " == " + strconv.Quote(id)}).WithContext(ctx)
	nodes, _, err := s.opt.Nodes.List(q)
	if err != nil {
		return nil, ok200, fmt.Errorf("find the node of a FleetLock id: %w", err)
	}
	switch len(nodes) {
	case 0:
		return nil, ok200, nil
	case 1:
		return nodes[0], ok200, nil
	}
	nn := make([]string, 0, len(nodes))
	for _, n := range nodes {
		nn = append(nn, n.Name)
	}
	slices.Sort(nn)
	s.noteConflict(id, "the meta "+NodeMetaKey+" of nodes "+strings.Join(nn, ", "))
	return nil, conflict("the meta " + NodeMetaKey + " of several nodes"), nil
}

// conflict answers an id that names several hosts; the answer names neither
// the id nor the hosts (the client may not be one of them), the log does.
func conflict(what string) answer {
	return fail(KindIdentityConflict, "this FleetLock id is "+what+": an operator must make it unique (see the server's log)")
}

func hostNames(recs []store.HostRecord) []string {
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Host)
	}
	return names
}

// ignoreClaims reports the claims of id by records other than host's.
func (s *Server) ignoreClaims(id string, claims []store.HostRecord, host, why string) {
	for _, h := range claims {
		if h.Host != host {
			s.ignoreClaim(id, h.Host, why)
		}
	}
}

// ignoreClaim reports, once, that the record of host claims id and is not
// counted: a warning and rollboot_fleetlock_ignored_claims_total{reason}.
func (s *Server) ignoreClaim(id, host, why string) {
	if s.noted.first(id + "\x00" + host + "\x00" + why) {
		s.ignored.WithLabelValues(why).Inc()
		s.log.Warn("a host record claims a FleetLock id; not counted", "fleetlock_id", id, "host", host,
			"reason", why, "why", claimText[why])
	}
}

// noteConflict logs, once, an id that names several hosts.
func (s *Server) noteConflict(id, what string) {
	if s.noted.first(id + "\x00\x00" + what) {
		s.log.Warn("FleetLock id names several hosts; refused until an operator makes it unique",
			"fleetlock_id", id, "claimed_by", what)
	}
}

// maxNoted bounds the set of reported conflicts; when full it starts again, and
// a conflict still there is reported again.
const maxNoted = 1024

// onceSet remembers which conflicts were reported.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first says whether key is seen for the first time (and remembers it).
func (o *onceSet) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[key] {
		return false
	}
	if o.seen == nil || len(o.seen) >= maxNoted {
		o.seen = map[string]bool{}
	}
	o.seen[key] = true
	return true
}

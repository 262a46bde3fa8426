package nomadsim

// The Nomad servers as the operator API sees them: the Raft configuration, the
// leader, and autopilot's view of each server's health.
//
//   - GET /v1/operator/autopilot/health (command/agent/operator_endpoint.go
//     OperatorServerHealth, nomad/operator_endpoint.go ServerHealth, nomad/autopilot.go
//     GetClusterHealth, raft-autopilot state.go)
//   - GET /v1/operator/raft/configuration (OperatorRaftConfiguration,
//     Operator.RaftGetConfiguration)
//   - PUT|POST /v1/operator/raft/transfer-leadership (OperatorRaftTransferLeadership,
//     Operator.TransferLeadershipToPeer, nomad/leader.go leadershipTransferToServer)
//
// Model. The servers built by New are Raft voters. A server is "following" when it is up
// (Serf alive), not stalled (SetServerHealthy false) and done catching up after a
// boot (Config.ServerStabilizeTime), while there is a leader. Autopilot counts the
// leader and following servers healthy: they have recent contact, the leader's term
// and a current log; the others keep the term, index and contact time they had
// when they stopped following. (Autopilot's own ServerStabilizationTime only gates
// promotions; the unhealthy period after a boot models the time a restarted server
// needs to replay and catch up its log.)
//
// Leadership. Losing the leader (host down, stalled leader after ElectionTime, quorum
// lost) leaves the cluster without a leader; an election among the alive, non-stalled
// voters follows after Config.ElectionTime when a quorum (voters/2+1) is alive. Every
// leader change starts a new term, is a Raft write (the index moves) and is logged as
// EventLeader.
//
// Autopilot (autopilot.go). A new leader's autopilot starts with an empty state;
// cleanup_dead_servers (on by default, Config.KeepDeadServers turns it off)
// removes a server that is down at a reconcile pass, and when it is back the
// leader adds it as a non-voter, promoted once it has been healthy for
// AutopilotStabilizationTime. The health reply reports the leader's autopilot
// state; the Raft configuration and /v1/status/peers report Raft itself.
//
// No server hosts. A cluster configured with no servers (client-only test clusters)
// is served by one implicit server that is no host and cannot reboot: it is the
// leader (SetLeaderLost still takes it away), appears in the Raft configuration,
// /v1/status/* and autopilot health with address 127.0.0.1:4647, and is replaced
// by the real servers as soon as a server host is added.

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/nomad/api"
)

// EventServerHealth records a server stalling or recovering (SetServerHealthy) or
// becoming healthy after catching up. Details: "healthy" = "true"/"false".
const EventServerHealth = "server.health"

// implicitServerAddr is the Raft address of the implicit server.
const implicitServerAddr = "127.0.0.1:4647"

type serverState struct {
	entries     []*serverEntry // the Raft configuration, in join order
	configIndex uint64         // index of the last configuration change
	leader      string         // Raft ID of the leader; "" when there is none
	term        uint64
	lost        bool         // SetLeaderLost(true): no election until cleared
	implicit    *serverEntry // the implicit server of a cluster without server hosts
	reconcileN  uint64       // generation of the pending reconcile timer

	removed []*serverEntry // removed by autopilot's dead-server cleanup, not (yet) back
	ap      autopilotRun
}

type serverEntry struct {
	host  *Host // nil for the implicit server
	info  *ServerInfo
	voter bool // Raft suffrage

	alive      bool // Serf alive (the host is up)
	stalled    bool // SetServerHealthy(false)
	catchingUp bool // booted less than ServerStabilizeTime ago
	catchGen   uint64

	// Frozen when the server stops following the leader.
	lastTerm    uint64
	lastIndex   uint64
	lastContact time.Time

	healthy     bool
	stableSince time.Time
}

// start runs the autopilot reconcile passes of the three products.
func (st *serverState) start(s *Sim) {
	s.every(s.cfg.AutopilotInterval, func(now time.Time) {
		st.autopilotPassLocked(s, now)
		s.consul.g.autopilotPassLocked(s, now)
		s.vault.g.autopilotPassLocked(s, now)
	})
}

// autopilotPassLocked is one reconcile pass of the leader's autopilot
// (autopilot.go): promotions, then dead-server cleanup.
func (st *serverState) autopilotPassLocked(s *Sim, now time.Time) {
	if st.leader == "" || !st.ap.ready || len(st.entries) == 0 {
		return
	}
	st.refreshLocked(now)
	for _, e := range st.entries {
		if !e.voter && e.healthy && st.ap.promotable(s, now, e.stableSince) {
			e.voter = true
			st.configChangedLocked(s, EventServerPromoted, e)
		}
	}
	if s.cfg.KeepDeadServers {
		return
	}
	pruneDeadLocked(func() []*serverEntry { return st.entries },
		func(e *serverEntry) bool { return !e.alive },
		func(e *serverEntry) bool { return e.voter },
		func(e *serverEntry) { st.removeLocked(s, e) })
}

// removeLocked takes a failed server out of the Raft configuration.
func (st *serverState) removeLocked(s *Sim, e *serverEntry) {
	for i, x := range st.entries {
		if x == e {
			st.entries = append(st.entries[:i:i], st.entries[i+1:]...)
			break
		}
	}
	e.voter = false
	st.removed = append(st.removed, e)
	st.configChangedLocked(s, EventServerRemoved, e)
}

// rejoinLocked: the leader adds a removed server that is alive again as a
// non-voter (nomad/leader.go addRaftPeer → AddNonvoter).
func (st *serverState) rejoinLocked(s *Sim) {
	if st.leader == "" {
		return
	}
	keep := st.removed[:0]
	for _, e := range st.removed {
		if !e.alive {
			keep = append(keep, e)
			continue
		}
		e.voter = false
		st.entries = append(st.entries, e)
		st.configChangedLocked(s, EventServerRejoined, e)
	}
	st.removed = keep
}

// configChangedLocked records a change of the Raft configuration (a Raft write).
func (st *serverState) configChangedLocked(s *Sim, typ string, e *serverEntry) {
	st.configIndex = s.bumpLocked()
	st.refreshLocked(time.Now())
	ev := Event{Type: typ, Details: map[string]string{"product": "nomad", "id": e.info.ID}}
	if e.host != nil {
		ev.Host = e.host.Name
	}
	s.eventLocked(ev)
}

// allLocked is the Raft configuration: the server hosts, or the implicit server.
func (st *serverState) allLocked() []*serverEntry {
	if len(st.entries) == 0 && st.implicit != nil {
		return []*serverEntry{st.implicit}
	}
	return st.entries
}

func (st *serverState) leaderLocked() string { return st.leader }

// peersLocked are the Raft addresses of the configuration (/v1/status/peers).
func (st *serverState) peersLocked() []string {
	out := []string{}
	for _, e := range st.allLocked() {
		out = append(out, e.info.RaftAddr)
	}
	return out
}

func (st *serverState) byIDLocked(id string) *serverEntry {
	for _, e := range st.allLocked() {
		if e.info.ID == id {
			return e
		}
	}
	return nil
}

func (st *serverState) byHostLocked(h *Host) *serverEntry {
	for _, e := range st.entries {
		if e.host == h {
			return e
		}
	}
	return nil
}

func (st *serverState) leaderEntryLocked() *serverEntry {
	if st.leader == "" {
		return nil
	}
	return st.byIDLocked(st.leader)
}

func (st *serverState) followingLocked(e *serverEntry) bool {
	return st.leader != "" && e.alive && !e.stalled && !e.catchingUp
}

// freezeLocked records where a following server stands when it stops following.
func (st *serverState) freezeLocked(s *Sim, e *serverEntry) {
	if st.followingLocked(e) {
		e.lastTerm, e.lastIndex, e.lastContact = st.term, s.index, time.Now()
	}
}

func (st *serverState) freezeAllLocked(s *Sim) {
	for _, e := range st.allLocked() {
		st.freezeLocked(s, e)
	}
}

// refreshLocked recomputes autopilot health; StableSince is the last change.
func (st *serverState) refreshLocked(now time.Time) {
	for _, e := range st.allLocked() {
		h := e.info.ID == st.leader || st.followingLocked(e)
		if h != e.healthy {
			e.healthy, e.stableSince = h, now
		}
	}
}

// addLocked adds a server host to the Raft configuration (a configuration change
// is a Raft write). The first server host replaces the implicit server.
func (st *serverState) addLocked(s *Sim, h *Host) {
	if h.Server == nil {
		return
	}
	if len(st.entries) == 0 && st.implicit != nil && st.leader == st.implicit.info.ID {
		st.clearLeaderLocked(s, "implicit server replaced")
	}
	now := time.Now()
	st.entries = append(st.entries, &serverEntry{
		host: h, info: h.Server, voter: h.Server.Voter, alive: h.Up, healthy: false, stableSince: now,
		lastTerm: st.term, lastIndex: s.index, lastContact: now,
	})
	st.configIndex = s.bumpLocked()
	st.refreshLocked(now)
}

// quorumLocked reports whether a majority of the voters is alive.
func (st *serverState) quorumLocked() bool {
	voters, alive := 0, 0
	for _, e := range st.allLocked() {
		if e.voter {
			voters++
			if e.alive {
				alive++
			}
		}
	}
	return voters > 0 && alive >= voters/2+1
}

// electLocked elects a leader now when there is none, none is being withheld
// (SetLeaderLost) and a quorum is alive. Candidates are the alive, non-stalled
// voters; Raft's log check makes a caught-up one win when there is one.
func (st *serverState) electLocked(s *Sim) {
	if st.lost || st.leader != "" {
		return
	}
	if len(st.entries) == 0 {
		if st.implicit == nil {
			now := time.Now()
			st.implicit = &serverEntry{
				info: &ServerInfo{ID: s.uuidLocked(), Name: "nomadsim." + s.cfg.Region,
					RaftAddr: implicitServerAddr, Voter: true},
				voter: true, alive: true, stableSince: now, lastContact: now,
			}
		}
		st.setLeaderLocked(s, st.implicit, "election")
		return
	}
	if !st.quorumLocked() {
		return
	}
	var ready, behind []*serverEntry
	for _, e := range st.entries {
		if !e.voter || !e.alive || e.stalled {
			continue
		}
		if e.catchingUp {
			behind = append(behind, e)
		} else {
			ready = append(ready, e)
		}
	}
	if len(ready) == 0 {
		ready = behind
	}
	if len(ready) == 0 {
		return
	}
	st.setLeaderLocked(s, ready[s.rng.IntN(len(ready))], "election")
}

// setLeaderLocked makes e the leader in a new term.
func (st *serverState) setLeaderLocked(s *Sim, e *serverEntry, reason string) {
	prev := st.leader
	if prev != "" {
		st.freezeAllLocked(s)
	}
	st.leader = e.info.ID
	st.term++
	e.catchingUp = false
	e.catchGen++
	idx := s.bumpLocked()
	s.topics.allLocked() // every query re-runs on the new leader
	st.refreshLocked(time.Now())
	st.ap.leaderChangedLocked(s, true, prev == "" && st.term == 1, func() { st.refreshLocked(time.Now()) })
	ev := Event{Type: EventLeader, Details: map[string]string{
		"id": e.info.ID, "address": e.info.RaftAddr, "previous": prev,
		"term": fmt.Sprint(st.term), "reason": reason, "index": fmt.Sprint(idx)}}
	if e.host != nil {
		ev.Host = e.host.Name
	}
	s.eventLocked(ev)
	s.vars.leaderChangedLocked(s, true)
	st.rejoinLocked(s)
	// A new leader starts the nodes' heartbeat timers; after a leader change they
	// get the failover TTL (heartbeat.go initializeHeartbeatTimers).
	s.cluster.leaderElectedLocked(s, st.term > 1)
}

// clearLeaderLocked leaves the cluster without a leader.
func (st *serverState) clearLeaderLocked(s *Sim, reason string) {
	prev := st.leader
	if prev == "" {
		return
	}
	st.freezeAllLocked(s)
	st.leader = ""
	idx := s.bumpLocked()
	s.topics.allLocked() // every query answers "No cluster leader"
	st.refreshLocked(time.Now())
	st.ap.leaderChangedLocked(s, false, false, nil)
	s.eventLocked(Event{Type: EventLeader, Details: map[string]string{
		"id": "", "previous": prev, "term": fmt.Sprint(st.term), "reason": reason,
		"index": fmt.Sprint(idx)}})
	s.vars.leaderChangedLocked(s, false)
	s.cluster.leaderLostLocked(s) // heartbeat.go clearAllHeartbeatTimers
}

// scheduleReconcileLocked runs reconcileLocked after ElectionTime (the latest
// schedule wins).
func (st *serverState) scheduleReconcileLocked(s *Sim) {
	st.reconcileN++
	n := st.reconcileN
	s.after(s.cfg.ElectionTime, func() {
		if st.reconcileN == n {
			st.reconcileLocked(s)
		}
	})
}

// reconcileLocked is what Raft does after an election timeout: a stalled leader or
// one without a quorum steps down, then an election runs if possible.
func (st *serverState) reconcileLocked(s *Sim) {
	if l := st.leaderEntryLocked(); l != nil && (l.stalled || !l.alive || !st.quorumLocked()) {
		st.clearLeaderLocked(s, "leader lost contact with quorum")
	}
	st.electLocked(s)
}

// hostDownLocked: the server host went down. Serf marks it failed; a leader is gone
// at once, and the remaining servers elect a new one after ElectionTime if a quorum
// is left (a leader that lost its quorum steps down then).
func (st *serverState) hostDownLocked(s *Sim, h *Host) {
	e := st.byHostLocked(h)
	if e == nil {
		if e = st.removedByHostLocked(h); e != nil {
			e.alive, e.catchingUp = false, false // a removed server is no Raft peer
			e.catchGen++
		}
		return
	}
	st.freezeLocked(s, e)
	e.alive, e.catchingUp = false, false
	e.catchGen++
	s.eventLocked(Event{Type: EventServerDown, Host: h.Name, Details: map[string]string{"id": e.info.ID}})
	if st.leader == e.info.ID {
		st.clearLeaderLocked(s, "leader down")
	} else {
		s.bumpLocked()
	}
	st.refreshLocked(time.Now())
	st.scheduleReconcileLocked(s)
}

// hostUpLocked: the server host is back. It is Serf-alive at once but unhealthy
// until it caught up (ServerStabilizeTime); a cluster without a leader elects one
// after ElectionTime if the quorum is back.
func (st *serverState) hostUpLocked(s *Sim, h *Host) {
	e := st.byHostLocked(h)
	if e == nil {
		e = st.removedByHostLocked(h)
	}
	if e == nil {
		return
	}
	e.alive, e.catchingUp = true, true
	e.catchGen++
	gen := e.catchGen
	s.eventLocked(Event{Type: EventServerUp, Host: h.Name, Details: map[string]string{"id": e.info.ID}})
	s.bumpLocked()
	st.refreshLocked(time.Now())
	s.after(s.cfg.ServerStabilizeTime, func() {
		if e.catchGen != gen {
			return
		}
		e.catchingUp = false
		s.bumpLocked()
		st.refreshLocked(time.Now())
		s.eventLocked(Event{Type: EventServerHealth, Host: h.Name, Details: map[string]string{
			"id": e.info.ID, "healthy": fmt.Sprint(e.healthy), "reason": "caught up"}})
		if st.leader == "" {
			st.electLocked(s)
		}
	})
	st.rejoinLocked(s)
	if st.leader == "" {
		st.scheduleReconcileLocked(s)
	}
}

func (st *serverState) removedByHostLocked(h *Host) *serverEntry {
	for _, e := range st.removed {
		if e.host == h {
			return e
		}
	}
	return nil
}

// SetLeaderLost makes the cluster lose its leader (true): reads that do not allow
// stale results and every write fail with 500 "No cluster leader", stale reads
// report KnownLeader=false. false elects a leader again at once (if a quorum is up).
func (s *Sim) SetLeaderLost(lost bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.servers
	st.lost = lost
	if lost {
		st.clearLeaderLocked(s, "leader lost (injected)")
		return nil
	}
	st.electLocked(s)
	if st.leader == "" {
		return errors.New("no quorum of servers is up: no leader can be elected")
	}
	return nil
}

// SetServerHealthy makes the Nomad server on host a stalled follower (false): Serf
// still sees it alive, but it stops applying the log, so its contact, term and index
// go stale and autopilot counts it unhealthy. A stalled leader is deposed after
// ElectionTime. true makes it follow again.
func (s *Sim) SetServerHealthy(host string, healthy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok {
		return fmt.Errorf("host %q not found", host)
	}
	st := &s.servers
	e := st.byHostLocked(h)
	if e == nil {
		return fmt.Errorf("host %q runs no Nomad server", host)
	}
	if !healthy {
		st.freezeLocked(s, e)
	}
	e.stalled = !healthy
	s.bumpLocked()
	st.refreshLocked(time.Now())
	s.eventLocked(Event{Type: EventServerHealth, Host: host, Details: map[string]string{
		"id": e.info.ID, "healthy": fmt.Sprint(healthy), "reason": "injected"}})
	st.scheduleReconcileLocked(s)
	return nil
}

// ---- routes --------------------------------------------------------------------

func (s *Sim) registerOperatorRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/operator/autopilot/health", s.handleAutopilotHealth)
	mux.HandleFunc("/v1/operator/raft/configuration", s.handleRaftConfiguration)
	mux.HandleFunc("/v1/operator/raft/transfer-leadership", s.handleTransferLeadership)
	s.registerStatusRoutes(mux)
}

// handleAutopilotHealth answers GET /v1/operator/autopilot/health. The RPC is always
// forwarded to the leader (AllowStale is forced off), then needs operator:read. The
// reply is 429 with the same JSON when the cluster is not healthy. Like Nomad it sets
// no index header (OperatorServerHealth calls no setMeta).
func (s *Sim) handleAutopilotHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusNotFound, "Invalid method")
		return
	}
	if _, err := parseQuery(r); err != nil {
		writeErr(w, err)
		return
	}
	code, out, err := func() (int, *api.OperatorHealthReply, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.servers.leaderLocked() == "" {
			return 0, nil, errNoLeader
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return 0, nil, err
		}
		if !tok.AllowOperator(false) {
			return 0, nil, errPermissionDenied
		}
		out := s.servers.autopilotHealthLocked(s)
		code := http.StatusOK
		if !out.Healthy {
			code = http.StatusTooManyRequests
		}
		return code, out, nil
	}()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, code, out)
}

// autopilotHealthLocked is what the leader's autopilot reports: an empty,
// unhealthy state before its first pass (autopilot.go), else healthLocked.
func (st *serverState) autopilotHealthLocked(s *Sim) *api.OperatorHealthReply {
	if !st.ap.ready {
		return &api.OperatorHealthReply{Voters: []string{}, Servers: []api.ServerHealth{}}
	}
	return st.healthLocked(s)
}

// healthLocked is GetClusterHealth: FailureTolerance = max(0, healthy voters −
// (voters/2+1)), Healthy only when every server is.
func (st *serverState) healthLocked(s *Sim) *api.OperatorHealthReply {
	now := time.Now()
	st.refreshLocked(now)
	out := &api.OperatorHealthReply{Healthy: true, Leader: st.leader, Voters: []string{}}
	voters, healthyVoters := 0, 0
	for _, e := range st.allLocked() {
		sh := api.ServerHealth{
			ID: e.info.ID, Name: e.info.Name, Address: e.info.RaftAddr,
			SerfStatus: "alive", Version: simNomadVersion,
			Leader: e.info.ID == st.leader, Voter: e.voter,
			Healthy:     e.healthy,
			StableSince: st.ap.stableSince(e.stableSince).Round(time.Second).UTC(),
		}
		if !e.alive {
			sh.SerfStatus = "failed"
		}
		if sh.Leader || st.followingLocked(e) {
			sh.LastTerm, sh.LastIndex = st.term, s.index
		} else {
			sh.LastTerm, sh.LastIndex = e.lastTerm, e.lastIndex
			sh.LastContact = now.Sub(e.lastContact)
		}
		if e.voter {
			voters++
			out.Voters = append(out.Voters, e.info.ID)
			if e.healthy {
				healthyVoters++
			}
		}
		if !e.healthy {
			out.Healthy = false
		}
		out.Servers = append(out.Servers, sh)
	}
	out.FailureTolerance = max(0, healthyVoters-(voters/2+1))
	return out
}

// handleRaftConfiguration answers GET /v1/operator/raft/configuration: stale reads
// allowed, management token required (Operator.RaftGetConfiguration), no index
// header. A wrong method gets a bare 405.
func (s *Sim) handleRaftConfiguration(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	qp, err := parseQuery(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out, err := func() (*api.RaftConfiguration, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := &s.servers
		if !qp.stale && st.leader == "" {
			return nil, errNoLeader
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return nil, err
		}
		if !tok.Management {
			return nil, errPermissionDenied
		}
		out := &api.RaftConfiguration{Index: st.configIndex, Servers: []*api.RaftServer{}}
		for _, e := range st.allLocked() {
			out.Servers = append(out.Servers, &api.RaftServer{
				ID: e.info.ID, Node: e.info.Name, Address: e.info.RaftAddr,
				Leader: e.info.ID == st.leader, Voter: e.voter, RaftProtocol: "3",
			})
		}
		return out, nil
	}()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// raftIDAddress and leadershipTransferResponse are structs.RaftIDAddress and
// structs.LeadershipTransferResponse as JSON.
type raftIDAddress struct {
	Address string
	ID      string
}

type leadershipTransferResponse struct {
	From raftIDAddress
	To   raftIDAddress
	Noop bool
	Err  error
}

// handleTransferLeadership answers PUT|POST /v1/operator/raft/transfer-leadership
// with exactly one of ?id= or ?address=. Without a leader the forward fails first
// (nomad/rpc.go getLeaderForRPC → 500 "No cluster leader"; the 503 of
// TransferLeadershipToPeer is only reached when leadership is lost in between,
// which cannot happen here). Then management, the peer lookup (400), Noop for the
// current leader, and the transfer. A target that is down or stalled never catches
// up: raft times out three times (leadershipTransferToServer) → 500.
func (s *Sim) handleTransferLeadership(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "Invalid method")
		return
	}
	params := r.URL.Query()
	id, hasID := params["id"]
	addr, hasAddr := params["address"]
	var msg string
	switch {
	case !hasID && !hasAddr:
		msg = "must specify id or address"
	case hasID && hasAddr:
		msg = "must specify either id or address"
	case hasID && id[0] == "":
		msg = "id must be non-empty"
	case hasID && len(id) > 1:
		msg = "must specify only one id"
	case hasAddr && addr[0] == "":
		msg = "address must be non-empty"
	case hasAddr && len(addr) > 1:
		msg = "must specify only one address"
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	out, err := func() (*leadershipTransferResponse, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := &s.servers
		if st.leader == "" {
			return nil, errNoLeader
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return nil, err
		}
		if !tok.Management {
			return nil, errPermissionDenied
		}
		from := st.leaderEntryLocked()
		out := &leadershipTransferResponse{From: raftIDAddress{Address: from.info.RaftAddr, ID: from.info.ID}}
		var target *serverEntry
		for _, e := range st.allLocked() {
			if (hasID && e.info.ID == id[0]) || (hasAddr && e.info.RaftAddr == addr[0]) {
				target = e
				break
			}
		}
		if target == nil {
			if hasID {
				return nil, errCode(http.StatusBadRequest, "id %q was not found in the Raft configuration", id[0])
			}
			return nil, errCode(http.StatusBadRequest, "address %q was not found in the Raft configuration", addr[0])
		}
		out.To = raftIDAddress{Address: target.info.RaftAddr, ID: target.info.ID}
		if target == from {
			out.Noop = true
			return out, nil
		}
		if !target.alive || target.stalled || !target.voter {
			return nil, errors.New("failed to transfer leadership in 3 attempts. last error: leadership transfer timeout")
		}
		st.setLeaderLocked(s, target, "leadership transfer")
		return out, nil
	}()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

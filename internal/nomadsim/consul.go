package nomadsim

// Consul servers co-located with the Nomad servers (Config.ConsulServers), and the
// Raft/autopilot model shared by the Consul and Vault clusters (raftGroup).
//
// Consul endpoints (reference §7; Consul agent/*_endpoint.go, api v1.34.5):
//
//   - GET /v1/operator/autopilot/health (agent/operator_endpoint.go
//     OperatorServerHealth): 200 when healthy, 429 with the same body otherwise;
//     api.Operator().AutopilotServerHealth accepts both (requireHttpCodes(200, 429)).
//   - GET /v1/operator/autopilot/state (OperatorAutopilotState, autopilotToAPIState).
//   - GET /v1/operator/raft/configuration (OperatorRaftConfiguration).
//   - POST /v1/operator/raft/transfer-leader[?id=] (OperatorRaftTransferLeader, Consul
//     ≥ 1.15; hashicorp/raft LeadershipTransfer / LeadershipTransferToServer).
//   - GET /v1/status/leader, /v1/status/peers (agent/status_endpoint.go).
//   - GET /v1/agent/self (agent/agent_endpoint.go AgentSelf).
//   - PUT /v1/agent/maintenance (AgentNodeMaintenance → agent.go
//     EnableNodeMaintenance/DisableNodeMaintenance, check "_node_maintenance").
//   - GET /v1/agent/checks (AgentChecks: the local agent's checks).
//   - GET /v1/health/node/<node> (agent/health_endpoint.go HealthNodeChecks; a
//     blocking query with X-Consul-Index/KnownLeader/LastContact, agent/http.go setMeta),
//     with the service checks of the node's allocations (services.go).
//
// ACLs are not enforced: X-Consul-Token and "Authorization: Bearer" are accepted and
// ignored, as on an agent with acl.enabled = false.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// Event types of the Consul and Vault clusters.
const (
	EventConsulLeader      = "consul.leader"      // a Consul leader was elected or lost
	EventConsulHealth      = "consul.health"      // a Consul server stalled, recovered or caught up
	EventConsulMaintenance = "consul.maintenance" // node maintenance enabled or disabled
)

// simConsulVersion is the Consul version the emulator claims to be.
const simConsulVersion = "1.21.4"

// ---- shared Raft / autopilot model ----------------------------------------------

// raftGroup is one Raft cluster with autopilot (Consul or Vault), modelled like the
// Nomad servers in operator.go: raft-autopilot state.go computes health the same way
// in all three products. A member "participates" when its host is up and (Vault) it
// is initialized and unsealed: a sealed Vault node does not run Raft. A
// participating, non-stalled member that caught up after (re)joining follows the
// leader and is healthy; the others keep the term, index and contact time they had
// when they stopped following. Losing the leader starts an election after
// Config.ElectionTime among the participating, non-stalled voters, when a quorum
// (voters/2+1) participates. Autopilot (autopilot.go) resets its state on every
// leader change, promotes stable non-voters and, with cleanup set, removes members
// whose host is down; they rejoin as non-voters.
type raftGroup struct {
	kind        string // "consul" or "vault"
	leaderEvent string
	members     []*raftMember
	leader      *raftMember
	term        uint64
	index       uint64 // the group's own Raft index (X-Consul-Index, last_index)
	configIndex uint64
	reconcileN  uint64
	leaderSince time.Time // when the current leader was elected
	leaderLost  time.Time // when the last leader was lost

	cleanup bool          // autopilot's cleanup_dead_servers
	removed []*raftMember // removed by the dead-server cleanup, not (yet) back
	ap      autopilotRun
}

type raftMember struct {
	host    *Host
	id      string
	name    string
	addr    string // Raft address
	apiAddr string // Vault: api_addr
	voter   bool
	up      bool // the host is up
	sealed  bool // Vault: sealed (does not participate in Raft)
	uninit  bool // Vault: not initialized
	stalled bool // Set*ServerHealthy(false)

	catchingUp bool // (re)joined less than ServerStabilizeTime ago
	catchGen   uint64
	holdUntil  time.Time // Vault: stepped down, does not take the lock before this

	lastTerm    uint64
	lastIndex   uint64
	lastContact time.Time

	healthy     bool
	stableSince time.Time
}

func (m *raftMember) participating() bool { return m.up && !m.sealed && !m.uninit }

func (g *raftGroup) byHostLocked(h *Host) *raftMember {
	for _, m := range g.members {
		if m.host == h {
			return m
		}
	}
	return nil
}

func (g *raftGroup) byIDLocked(id string) *raftMember {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (g *raftGroup) followingLocked(m *raftMember) bool {
	return g.leader != nil && m != g.leader && m.participating() && !m.stalled && !m.catchingUp
}

// changedLocked is one Raft apply in the group: its index moves, and the emulator's
// index moves too so that WaitFor and blocking queries wake up.
func (g *raftGroup) changedLocked(s *Sim) {
	g.index++
	s.bumpLocked()
	g.refreshLocked(time.Now())
}

func (g *raftGroup) freezeLocked(m *raftMember) {
	if m == g.leader || g.followingLocked(m) {
		m.lastTerm, m.lastIndex, m.lastContact = g.term, g.index, time.Now()
	}
}

func (g *raftGroup) freezeAllLocked() {
	for _, m := range g.members {
		g.freezeLocked(m)
	}
}

// refreshLocked recomputes health; StableSince is the last change of Healthy
// (raft-autopilot state.go).
func (g *raftGroup) refreshLocked(now time.Time) {
	for _, m := range g.members {
		h := (m == g.leader) || g.followingLocked(m)
		if h != m.healthy {
			m.healthy, m.stableSince = h, now
		}
	}
}

func (g *raftGroup) addLocked(s *Sim, m *raftMember) {
	now := time.Now()
	m.stableSince, m.lastContact = now, now
	m.lastTerm, m.lastIndex = g.term, g.index
	g.members = append(g.members, m)
	g.changedLocked(s)
	g.configIndex = g.index
}

func (g *raftGroup) quorumLocked() bool {
	voters, alive := 0, 0
	for _, m := range g.members {
		if m.voter {
			voters++
			if m.participating() {
				alive++
			}
		}
	}
	return voters > 0 && alive >= voters/2+1
}

// electLocked elects a leader when there is none and a quorum participates. A caught
// up candidate wins over one still catching up (Raft's log check); a Vault node that
// stepped down does not take the lock before its hold time (vault/ha.go
// manualStepDownSleepPeriod).
func (g *raftGroup) electLocked(s *Sim) {
	if g.leader != nil || !g.quorumLocked() {
		return
	}
	now := time.Now()
	var ready, behind []*raftMember
	var nextHold time.Time
	for _, m := range g.members {
		if !m.voter || !m.participating() || m.stalled {
			continue
		}
		if now.Before(m.holdUntil) {
			if nextHold.IsZero() || m.holdUntil.Before(nextHold) {
				nextHold = m.holdUntil
			}
			continue
		}
		if m.catchingUp {
			behind = append(behind, m)
		} else {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		ready = behind
	}
	if len(ready) == 0 {
		if !nextHold.IsZero() {
			g.scheduleReconcileAtLocked(s, nextHold.Sub(now))
		}
		return
	}
	g.setLeaderLocked(s, ready[s.rng.IntN(len(ready))], "election")
}

func (g *raftGroup) setLeaderLocked(s *Sim, m *raftMember, reason string) {
	prev := g.leader
	if prev != nil {
		g.freezeAllLocked()
	}
	g.leader = m
	g.leaderSince = time.Now()
	g.term++
	m.catchingUp = false
	m.catchGen++
	g.changedLocked(s)
	g.ap.leaderChangedLocked(s, true, prev == nil && g.term == 1, func() { g.refreshLocked(time.Now()) })
	prevID := ""
	if prev != nil {
		prevID = prev.id
	}
	s.eventLocked(Event{Type: g.leaderEvent, Host: m.host.Name, Details: map[string]string{
		"id": m.id, "address": m.addr, "previous": prevID, "term": fmt.Sprint(g.term),
		"reason": reason}})
	g.rejoinLocked(s)
}

// autopilotPassLocked is one reconcile pass of the leader's autopilot
// (autopilot.go): promotions, then dead-server cleanup of members whose host is
// down (Serf failed).
func (g *raftGroup) autopilotPassLocked(s *Sim, now time.Time) {
	if g.leader == nil || !g.ap.ready {
		return
	}
	g.refreshLocked(now)
	for _, m := range g.members {
		if !m.voter && m.healthy && g.ap.promotable(s, now, m.stableSince) {
			m.voter = true
			g.configChangedLocked(s, EventServerPromoted, m)
		}
	}
	if !g.cleanup {
		return
	}
	pruneDeadLocked(func() []*raftMember { return g.members },
		func(m *raftMember) bool { return !m.up },
		func(m *raftMember) bool { return m.voter },
		func(m *raftMember) { g.removeLocked(s, m) })
}

func (g *raftGroup) removeLocked(s *Sim, m *raftMember) {
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i:i], g.members[i+1:]...)
			break
		}
	}
	m.voter = false
	g.removed = append(g.removed, m)
	g.configChangedLocked(s, EventServerRemoved, m)
}

// rejoinLocked: the leader adds removed members that are up again as non-voters
// (Consul leader.go joinConsulServer → AddNonvoter).
func (g *raftGroup) rejoinLocked(s *Sim) {
	if g.leader == nil {
		return
	}
	keep := g.removed[:0]
	for _, m := range g.removed {
		if !m.up {
			keep = append(keep, m)
			continue
		}
		m.voter = false
		g.members = append(g.members, m)
		g.configChangedLocked(s, EventServerRejoined, m)
	}
	g.removed = keep
}

func (g *raftGroup) removedByHostLocked(h *Host) *raftMember {
	for _, m := range g.removed {
		if m.host == h {
			return m
		}
	}
	return nil
}

// configChangedLocked records a change of the Raft configuration.
func (g *raftGroup) configChangedLocked(s *Sim, typ string, m *raftMember) {
	g.changedLocked(s)
	g.configIndex = g.index
	s.eventLocked(Event{Type: typ, Host: m.host.Name, Details: map[string]string{"product": g.kind, "id": m.id}})
}

func (g *raftGroup) clearLeaderLocked(s *Sim, reason string) {
	prev := g.leader
	if prev == nil {
		return
	}
	g.freezeAllLocked()
	g.leader = nil
	g.leaderLost = time.Now()
	g.changedLocked(s)
	g.ap.leaderChangedLocked(s, false, false, nil)
	s.eventLocked(Event{Type: g.leaderEvent, Details: map[string]string{
		"id": "", "previous": prev.id, "term": fmt.Sprint(g.term), "reason": reason}})
}

func (g *raftGroup) scheduleReconcileLocked(s *Sim) {
	g.scheduleReconcileAtLocked(s, s.cfg.ElectionTime)
}

func (g *raftGroup) scheduleReconcileAtLocked(s *Sim, d time.Duration) {
	g.reconcileN++
	n := g.reconcileN
	s.after(d, func() {
		if g.reconcileN == n {
			g.reconcileLocked(s)
		}
	})
}

// reconcileLocked: after an election timeout a stalled leader or one without a
// quorum steps down, then an election runs if possible.
func (g *raftGroup) reconcileLocked(s *Sim) {
	if l := g.leader; l != nil && (l.stalled || !l.participating() || !g.quorumLocked()) {
		g.clearLeaderLocked(s, "leader lost contact with quorum")
	}
	g.electLocked(s)
}

// leaveLocked: m stops participating (host down, Vault sealed). A leader is gone at
// once; the others elect a new one after ElectionTime.
func (g *raftGroup) leaveLocked(s *Sim, m *raftMember, why func()) {
	g.freezeLocked(m)
	why()
	m.catchingUp = false
	m.catchGen++
	if g.leader == m {
		g.clearLeaderLocked(s, "leader down")
	} else {
		g.changedLocked(s)
	}
	g.scheduleReconcileLocked(s)
}

// joinLocked: m participates again (host up, Vault unsealed). It is unhealthy until
// it caught up (Config.ServerStabilizeTime).
func (g *raftGroup) joinLocked(s *Sim, m *raftMember, healthEvent string) {
	m.catchingUp = true
	m.catchGen++
	gen := m.catchGen
	g.changedLocked(s)
	s.after(s.cfg.ServerStabilizeTime, func() {
		if m.catchGen != gen {
			return
		}
		m.catchingUp = false
		g.changedLocked(s)
		s.eventLocked(Event{Type: healthEvent, Host: m.host.Name, Details: map[string]string{
			"id": m.id, "healthy": fmt.Sprint(m.healthy), "reason": "caught up"}})
		if g.leader == nil {
			g.electLocked(s)
		}
	})
	if g.leader == nil {
		g.scheduleReconcileLocked(s)
	}
}

// setStalledLocked is Set{Consul,Vault}ServerHealthy: a stalled server is alive but
// stops applying the log; a stalled leader is deposed after ElectionTime.
func (g *raftGroup) setStalledLocked(s *Sim, m *raftMember, stalled bool, healthEvent string) {
	if stalled {
		g.freezeLocked(m)
	}
	m.stalled = stalled
	g.changedLocked(s)
	s.eventLocked(Event{Type: healthEvent, Host: m.host.Name, Details: map[string]string{
		"id": m.id, "healthy": fmt.Sprint(!stalled), "reason": "injected"}})
	g.scheduleReconcileLocked(s)
}

// raftServerView is one server as autopilot reports it.
type raftServerView struct {
	m           *raftMember
	leader      bool
	lastTerm    uint64
	lastIndex   uint64
	lastContact time.Duration
	stableSince time.Time // in the leader's autopilot state
}

// viewLocked is raft-autopilot's cluster state: FailureTolerance = max(0, healthy
// voters − (voters/2+1)); Healthy only when every server is.
func (g *raftGroup) viewLocked() (servers []raftServerView, healthy bool, tolerance int, voters []string) {
	now := time.Now()
	g.refreshLocked(now)
	healthy = true
	nVoters, healthyVoters := 0, 0
	voters = []string{}
	for _, m := range g.members {
		v := raftServerView{m: m, leader: m == g.leader, stableSince: g.ap.stableSince(m.stableSince)}
		if v.leader || g.followingLocked(m) {
			v.lastTerm, v.lastIndex = g.term, g.index
		} else {
			v.lastTerm, v.lastIndex = m.lastTerm, m.lastIndex
			v.lastContact = now.Sub(m.lastContact)
		}
		if m.voter {
			nVoters++
			voters = append(voters, m.id)
			if m.healthy {
				healthyVoters++
			}
		}
		if !m.healthy {
			healthy = false
		}
		servers = append(servers, v)
	}
	return servers, healthy, max(0, healthyVoters-(nVoters/2+1)), voters
}

// listenAux starts a per-host (h != nil) or cluster (h == nil) listener for a
// Consul or Vault handler. A per-host listener drops every connection while its host
// is down; the cluster listener drops it when route finds no host to forward to.
func (s *Sim) listenAux(h *Host, route func() *Host, serve func(w http.ResponseWriter, r *http.Request, target *Host)) (*listener, error) {
	return s.listenHandler("127.0.0.1:0", h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		target := h
		if target == nil {
			target = route()
		}
		up := target != nil && target.Up
		s.mu.Unlock()
		if !up {
			dropConnection(w)
			return
		}
		serve(w, r, target)
	}))
}

// ---- Consul ----------------------------------------------------------------------

type consulState struct {
	g            raftGroup
	cluster      *listener
	catalogIndex uint64                    // modify index of the health checks (X-Consul-Index)
	maint        map[string]*consulMaint   // by host name: the registered maintenance check
	nodeIDs      map[string]string         // by host name
	serfChanged  map[string]uint64         // by host name: index of the last serfHealth change
	lis          map[string]*listener      // by host name
	checkIdx     map[string]*consulCheckIx // by host name
}

type consulCheckIx struct{ create, modify uint64 }

// consulMaint is the persisted maintenance check (agent/agent.go persistCheck writes
// <data_dir>/checks/<hash>; here <host dir>/consul/checks/_node_maintenance).
type consulMaint struct {
	Reason string `json:"reason"`
}

// consulNodeMaintCheckID is structs.NodeMaint.
const consulNodeMaintCheckID = "_node_maintenance"

// defaultConsulNodeMaintReason is agent.go defaultNodeMaintReason.
const defaultConsulNodeMaintReason = "Maintenance mode is enabled for this node, but no reason was provided. This is a default message."

func (cs *consulState) init(s *Sim) {
	cs.g = raftGroup{kind: "consul", leaderEvent: EventConsulLeader, cleanup: !s.cfg.KeepDeadServers}
	cs.maint = map[string]*consulMaint{}
	cs.nodeIDs = map[string]string{}
	cs.serfChanged = map[string]uint64{}
	cs.lis = map[string]*listener{}
	cs.checkIdx = map[string]*consulCheckIx{}
	cs.catalogIndex = 1
}

func consulMaintFile(h *Host) string {
	return filepath.Join(h.Dir, "consul", "checks", consulNodeMaintCheckID)
}

// addConsulServerLocked starts a Consul server on h with its own agent listener.
func (s *Sim) addConsulServerLocked(h *Host, n int) error {
	cs := &s.consul
	lis, err := s.listenAux(h, nil, s.serveConsul)
	if err != nil {
		return err
	}
	cs.lis[h.Name] = lis
	h.ConsulAddr = lis.addr
	cs.nodeIDs[h.Name] = s.uuidLocked()
	cs.g.addLocked(s, &raftMember{
		host: h, id: cs.nodeIDs[h.Name], name: h.Name,
		addr: fmt.Sprintf("10.0.%d.%d:8300", n/250, n%250+1), voter: true, up: h.Up,
	})
	cs.catalogIndex = cs.g.index
	cs.checkIdx[h.Name] = &consulCheckIx{create: cs.g.index, modify: cs.g.index}
	cs.loadMaintLocked(h)
	if cs.cluster == nil {
		cl, err := s.listenAux(nil, func() *Host { return cs.routeLocked() }, s.serveConsul)
		if err != nil {
			return err
		}
		cs.cluster = cl
	}
	return nil
}

// routeLocked is where the cluster address forwards: the leader's agent, or the
// first server that is up when there is no leader.
func (cs *consulState) routeLocked() *Host {
	if cs.g.leader != nil && cs.g.leader.host.Up {
		return cs.g.leader.host
	}
	for _, m := range cs.g.members {
		if m.host.Up {
			return m.host
		}
	}
	return nil
}

// loadMaintLocked reloads the persisted maintenance check at agent start
// (agent.go loadChecks reads the persisted checks).
func (cs *consulState) loadMaintLocked(h *Host) {
	b, err := os.ReadFile(consulMaintFile(h))
	if err != nil {
		delete(cs.maint, h.Name)
		return
	}
	var m consulMaint
	if json.Unmarshal(b, &m) != nil {
		delete(cs.maint, h.Name)
		return
	}
	cs.maint[h.Name] = &m
}

func (s *Sim) consulHostDownLocked(h *Host) {
	cs := &s.consul
	m := cs.g.byHostLocked(h)
	if m == nil {
		if m = cs.g.removedByHostLocked(h); m != nil {
			m.up, m.catchingUp = false, false // a removed server is no Raft peer
			m.catchGen++
			cs.serfChangedLocked(h)
		}
		return
	}
	cs.g.leaveLocked(s, m, func() { m.up = false })
	cs.serfChangedLocked(h)
}

func (s *Sim) consulHostUpLocked(h *Host) {
	cs := &s.consul
	m := cs.g.byHostLocked(h)
	if m == nil {
		m = cs.g.removedByHostLocked(h)
	}
	if m == nil {
		return
	}
	m.up = true
	cs.loadMaintLocked(h)
	cs.serfChangedLocked(h)
	cs.g.joinLocked(s, m, EventConsulHealth)
	cs.g.rejoinLocked(s)
}

// serfChangedLocked: the serfHealth check of h changed (the leader's reconcile
// updates the catalog when a member fails or joins; leader.go handleFailedMember).
func (cs *consulState) serfChangedLocked(h *Host) {
	cs.g.index++
	cs.catalogIndex = cs.g.index
	if ix := cs.checkIdx[h.Name]; ix != nil {
		ix.modify = cs.g.index
	}
}

// SetConsulServerHealthy makes the Consul server on host a stalled follower (false)
// or a following one again (true), like SetServerHealthy for Nomad.
func (s *Sim) SetConsulServerHealthy(host string, healthy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.consulMemberLocked(host)
	if err != nil {
		return err
	}
	s.consul.g.setStalledLocked(s, m, !healthy, EventConsulHealth)
	return nil
}

func (s *Sim) consulMemberLocked(host string) (*raftMember, error) {
	h, ok := s.hosts[host]
	if !ok {
		return nil, fmt.Errorf("host %q not found", host)
	}
	m := s.consul.g.byHostLocked(h)
	if m == nil {
		return nil, fmt.Errorf("host %q runs no Consul server", host)
	}
	return m, nil
}

// ConsulAddress is the URL of the Consul cluster address (as CONSUL_HTTP_ADDR): it
// forwards to the leader's agent. "" when the cluster runs no Consul.
func (s *Sim) ConsulAddress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consul.cluster == nil {
		return ""
	}
	return "http://" + s.consul.cluster.addr
}

// ConsulLeader returns the host of the Consul leader ("" when there is none).
func (s *Sim) ConsulLeader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consul.g.leader == nil {
		return ""
	}
	return s.consul.g.leader.host.Name
}

// ---- Consul HTTP -----------------------------------------------------------------

var errConsulNoLeader = errCode(http.StatusInternalServerError, "No cluster leader")

// serveConsul answers a Consul request as the agent on target.
func (s *Sim) serveConsul(w http.ResponseWriter, r *http.Request, target *Host) {
	p := r.URL.Path
	get := func(fn func(http.ResponseWriter, *http.Request, *Host)) {
		if r.Method != http.MethodGet {
			consulMethodNotAllowed(w, r)
			return
		}
		fn(w, r, target)
	}
	switch {
	case p == "/v1/operator/autopilot/health":
		get(s.consulAutopilotHealth)
	case p == "/v1/operator/autopilot/state":
		get(s.consulAutopilotState)
	case p == "/v1/operator/raft/configuration":
		get(s.consulRaftConfiguration)
	case p == "/v1/operator/raft/transfer-leader":
		if r.Method != http.MethodPost {
			consulMethodNotAllowed(w, r)
			return
		}
		s.consulTransferLeader(w, r)
	case p == "/v1/status/leader":
		get(s.consulStatusLeader)
	case p == "/v1/status/peers":
		get(s.consulStatusPeers)
	case p == "/v1/agent/self":
		get(s.consulAgentSelf)
	case p == "/v1/agent/checks":
		get(s.consulAgentChecks)
	case p == "/v1/agent/maintenance":
		if r.Method != http.MethodPut {
			consulMethodNotAllowed(w, r)
			return
		}
		s.consulMaintenance(w, r, target)
	case strings.HasPrefix(p, "/v1/health/node/"):
		get(s.consulHealthNode)
	default:
		writeError(w, http.StatusNotFound, "404 page not found")
	}
}

// consulMethodNotAllowed is agent/http.go's MethodNotAllowedError: 405 with Allow.
func consulMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method))
}

func consulStale(r *http.Request) bool {
	_, ok := r.URL.Query()["stale"]
	return ok
}

// consulAutopilotHealth: OperatorServerHealth. The RPC goes to the leader (500 "No
// cluster leader" without one); 429 with the same body when unhealthy.
func (s *Sim) consulAutopilotHealth(w http.ResponseWriter, r *http.Request, _ *Host) {
	s.mu.Lock()
	g := &s.consul.g
	if g.leader == nil {
		s.mu.Unlock()
		writeErr(w, errConsulNoLeader)
		return
	}
	views, healthy, ft, _ := g.viewLocked()
	if !g.ap.ready { // a new leader's empty autopilot state (autopilot.go)
		views, healthy, ft = nil, false, 0
	}
	out := consulapi.OperatorHealthReply{Healthy: healthy, FailureTolerance: ft, Servers: []consulapi.ServerHealth{}}
	for _, v := range views {
		out.Servers = append(out.Servers, consulapi.ServerHealth{
			ID: v.m.id, Name: v.m.name, Address: v.m.addr, SerfStatus: consulSerfStatus(v.m),
			Version: simConsulVersion, Leader: v.leader,
			LastContact: consulapi.NewReadableDuration(v.lastContact),
			LastTerm:    v.lastTerm, LastIndex: v.lastIndex, Healthy: v.m.healthy, Voter: v.m.voter,
			StableSince: v.stableSince.Round(time.Second).UTC(),
		})
	}
	s.mu.Unlock()
	code := http.StatusOK
	if !healthy {
		code = http.StatusTooManyRequests
	}
	writeJSON(w, code, out)
}

func consulSerfStatus(m *raftMember) string {
	if m.up {
		return "alive"
	}
	return "failed"
}

// consulAutopilotState: OperatorAutopilotState (agent/operator_endpoint.go
// autopilotToAPIState): Servers keyed by ID with Status leader/voter/non-voter.
func (s *Sim) consulAutopilotState(w http.ResponseWriter, r *http.Request, _ *Host) {
	s.mu.Lock()
	g := &s.consul.g
	if g.leader == nil {
		s.mu.Unlock()
		writeErr(w, errConsulNoLeader)
		return
	}
	views, healthy, ft, voters := g.viewLocked()
	leader := g.leader.id
	if !g.ap.ready { // a new leader's empty autopilot state (autopilot.go)
		views, healthy, ft, voters, leader = nil, false, 0, []string{}, ""
	}
	out := consulapi.AutopilotState{Healthy: healthy, FailureTolerance: ft,
		Servers: map[string]consulapi.AutopilotServer{}, Leader: leader, Voters: voters}
	for _, v := range views {
		st := consulapi.AutopilotServerVoter
		switch {
		case v.leader:
			st = consulapi.AutopilotServerLeader
		case !v.m.voter:
			st = consulapi.AutopilotServerNonVoter
		}
		out.Servers[v.m.id] = consulapi.AutopilotServer{
			ID: v.m.id, Name: v.m.name, Address: v.m.addr, NodeStatus: consulSerfStatus(v.m),
			Version: simConsulVersion, LastContact: consulapi.NewReadableDuration(v.lastContact),
			LastTerm: v.lastTerm, LastIndex: v.lastIndex, Healthy: v.m.healthy,
			StableSince: v.stableSince.Round(time.Second).UTC(), Status: st,
			Meta: map[string]string{"consul-network-segment": ""}, NodeType: consulapi.AutopilotTypeVoter,
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// consulRaftConfiguration: OperatorRaftConfiguration; ?stale answers without a leader.
func (s *Sim) consulRaftConfiguration(w http.ResponseWriter, r *http.Request, _ *Host) {
	s.mu.Lock()
	g := &s.consul.g
	if g.leader == nil && !consulStale(r) {
		s.mu.Unlock()
		writeErr(w, errConsulNoLeader)
		return
	}
	views, _, _, _ := g.viewLocked()
	out := consulapi.RaftConfiguration{Index: g.configIndex, Servers: []*consulapi.RaftServer{}}
	for _, v := range views {
		out.Servers = append(out.Servers, &consulapi.RaftServer{ID: v.m.id, Node: v.m.name,
			Address: v.m.addr, Leader: v.leader, Voter: v.m.voter, ProtocolVersion: "3",
			LastIndex: v.lastIndex})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// consulTransferLeader: Operator.RaftLeaderTransfer. Without id raft picks the most
// up-to-date follower (raft.go pickServer); transferring to the leader itself fails
// ("cannot transfer leadership to itself"); a target that is not following never
// catches up and the transfer times out.
func (s *Sim) consulTransferLeader(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		g := &s.consul.g
		if g.leader == nil {
			return errConsulNoLeader
		}
		var target *raftMember
		if id == "" {
			for _, m := range g.members {
				if m.voter && g.followingLocked(m) {
					target = m
					break
				}
			}
			if target == nil {
				return errors.New("cannot find peer")
			}
		} else {
			target = g.byIDLocked(id)
			if target == nil {
				return errCode(http.StatusBadRequest, "id %q was not found in the Raft configuration", id)
			}
			if target == g.leader {
				return errors.New("cannot transfer leadership to itself")
			}
			if !target.voter || !target.participating() || target.stalled {
				return errors.New("leadership transfer timeout")
			}
		}
		g.setLeaderLocked(s, target, "leadership transfer")
		return nil
	}()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, consulapi.TransferLeaderResponse{Success: true})
}

// consulStatusLeader: Status.Leader, the leader's server RPC address or "".
func (s *Sim) consulStatusLeader(w http.ResponseWriter, r *http.Request, _ *Host) {
	s.mu.Lock()
	out := ""
	if l := s.consul.g.leader; l != nil {
		out = l.addr
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// consulStatusPeers: Status.Peers, the Raft addresses of the configuration.
func (s *Sim) consulStatusPeers(w http.ResponseWriter, r *http.Request, _ *Host) {
	s.mu.Lock()
	if s.consul.g.leader == nil && !consulStale(r) {
		s.mu.Unlock()
		writeErr(w, errConsulNoLeader)
		return
	}
	out := []string{}
	for _, m := range s.consul.g.members {
		out = append(out, m.addr)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// consulAgentSelf: AgentSelf, {Config, DebugConfig, Coord, Member, Stats, Meta, xDS};
// the values of Stats are strings (agent.go Stats).
func (s *Sim) consulAgentSelf(w http.ResponseWriter, r *http.Request, h *Host) {
	s.mu.Lock()
	cs := &s.consul
	m := cs.g.byHostLocked(h)
	leader, leaderAddr := "false", ""
	if cs.g.leader != nil {
		leaderAddr = cs.g.leader.addr
		if cs.g.leader == m {
			leader = "true"
		}
	}
	raftState := "Follower"
	if cs.g.leader == m {
		raftState = "Leader"
	} else if cs.g.leader == nil {
		raftState = "Candidate"
	}
	ip := strings.Split(m.addr, ":")[0]
	out := map[string]any{
		"Config": map[string]any{
			"Datacenter": s.cfg.Datacenter, "PrimaryDatacenter": s.cfg.Datacenter,
			"NodeName": h.Name, "NodeID": cs.nodeIDs[h.Name], "Partition": "",
			"Revision": "", "Server": true, "Version": simConsulVersion, "BuildDate": "2025-01-01T00:00:00Z",
		},
		"DebugConfig": map[string]any{"ServerMode": true, "NodeName": h.Name, "Datacenter": s.cfg.Datacenter},
		"Coord":       nil,
		"Member": map[string]any{
			"Name": h.Name, "Addr": ip, "Port": 8301, "Status": 1,
			"Tags": map[string]string{"role": "consul", "dc": s.cfg.Datacenter, "id": cs.nodeIDs[h.Name],
				"port": "8300", "vsn": "2", "build": simConsulVersion, "raft_vsn": "3"},
		},
		"Stats": map[string]any{
			"agent":  map[string]string{"check_monitors": "0", "checks": fmt.Sprint(len(cs.agentChecksLocked(h))), "services": "0"},
			"consul": map[string]string{"server": "true", "leader": leader, "leader_addr": leaderAddr, "bootstrap": "false", "known_datacenters": "1"},
			"raft":   map[string]string{"state": raftState, "term": fmt.Sprint(cs.g.term), "last_log_index": fmt.Sprint(cs.g.index)},
		},
		"Meta": map[string]string{"consul-network-segment": ""},
		"xDS":  nil,
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// agentChecksLocked are the checks registered with h's local agent.
func (cs *consulState) agentChecksLocked(h *Host) map[string]*consulapi.AgentCheck {
	out := map[string]*consulapi.AgentCheck{}
	if mt, ok := cs.maint[h.Name]; ok {
		out[consulNodeMaintCheckID] = &consulapi.AgentCheck{
			Node: h.Name, CheckID: consulNodeMaintCheckID, Name: "Node Maintenance Mode",
			Status: consulapi.HealthCritical, Notes: mt.Reason, Type: "maintenance",
		}
	}
	return out
}

func (s *Sim) consulAgentChecks(w http.ResponseWriter, r *http.Request, h *Host) {
	s.mu.Lock()
	out := s.consul.agentChecksLocked(h)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// consulMaintenance: AgentNodeMaintenance. enable missing → 400 "Missing value for
// enable", not a bool → 400 "Invalid value for enable: ..."; enabling registers the
// critical check with persist=true (re-enabling is a no-op); disabling removes it.
// Success is 200 with an empty body.
func (s *Sim) consulMaintenance(w http.ResponseWriter, r *http.Request, h *Host) {
	q := r.URL.Query()
	if _, ok := q["enable"]; !ok {
		writeError(w, http.StatusBadRequest, "Missing value for enable")
		return
	}
	enable, err := strconv.ParseBool(q.Get("enable"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value for enable: %q", q.Get("enable")))
		return
	}
	reason := q.Get("reason")
	if reason == "" {
		reason = defaultConsulNodeMaintReason
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := &s.consul
	_, on := cs.maint[h.Name]
	if enable == on {
		w.WriteHeader(http.StatusOK)
		return
	}
	file := consulMaintFile(h)
	if enable {
		b, _ := json.Marshal(consulMaint{Reason: reason})
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err == nil {
			err = os.WriteFile(file, b, 0o644)
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		cs.maint[h.Name] = &consulMaint{Reason: reason}
	} else {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		delete(cs.maint, h.Name)
	}
	cs.g.index++
	cs.catalogIndex = cs.g.index
	s.bumpLocked()
	s.eventLocked(Event{Type: EventConsulMaintenance, Host: h.Name, Details: map[string]string{
		"enabled": fmt.Sprint(enable), "reason": q.Get("reason")}})
	w.WriteHeader(http.StatusOK)
}

// consulHealthNode: HealthNodeChecks, a blocking query on the checks table. The
// catalog has serfHealth (critical while the agent is down, leader.go
// handleFailedMember) and the synced agent checks; an unknown node gives []. While
// the agent is down its last synced checks stay in the catalog.
func (s *Sim) consulHealthNode(w http.ResponseWriter, r *http.Request, _ *Host) {
	node := strings.TrimPrefix(r.URL.Path, "/v1/health/node/")
	q := r.URL.Query()
	var minIndex uint64
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid index")
			return
		}
		minIndex = n
	}
	wait := 5 * time.Minute // agent/http.go defaultQueryTime
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid wait time")
			return
		}
		wait = min(d, 10*time.Minute)
	}
	stale := consulStale(r)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		cs := &s.consul
		if cs.g.leader == nil && !stale {
			s.mu.Unlock()
			writeErr(w, errConsulNoLeader)
			return
		}
		idx := cs.catalogIndex
		h, known := s.hosts[node]
		// A Nomad client's host runs a Consul agent too (services.go).
		known = known && (cs.g.byHostLocked(h) != nil || h.NodeID != "")
		var svc consulapi.HealthChecks
		if known {
			var svcIdx uint64
			svc, svcIdx = s.serviceChecksLocked(h)
			// The checks follow both the catalog's index and the node's
			// allocations (a Nomad index): their sum moves when either does.
			idx += svcIdx
		}
		ch, closed := s.notify, s.closed
		if minIndex == 0 || idx > minIndex || closed {
			out := consulapi.HealthChecks{}
			if known {
				ix := cs.checkIdx[h.Name]
				if ix == nil {
					ix = &consulCheckIx{create: 1, modify: 1}
				}
				serf := &consulapi.HealthCheck{Node: node, CheckID: "serfHealth", Name: "Serf Health Status",
					Status: consulapi.HealthPassing, Output: "Agent alive and reachable",
					CreateIndex: ix.create, ModifyIndex: ix.modify}
				if !h.Up {
					serf.Status, serf.Output = consulapi.HealthCritical, "Agent not live or unreachable"
				}
				out = append(out, serf)
				for _, c := range cs.agentChecksLocked(h) {
					out = append(out, &consulapi.HealthCheck{Node: node, CheckID: c.CheckID, Name: c.Name,
						Status: c.Status, Notes: c.Notes, Type: c.Type, ServiceTags: []string{},
						CreateIndex: idx, ModifyIndex: idx})
				}
				out = append(out, svc...)
			}
			s.setConsulMetaLocked(w, idx)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, out)
			return
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			minIndex = 0
		case <-r.Context().Done():
			return
		}
	}
}

// setConsulMetaLocked sets agent/http.go setMeta's headers: X-Consul-Index (never
// 0: setIndex bumps 0 to 1), X-Consul-KnownLeader and X-Consul-LastContact (ms).
func (s *Sim) setConsulMetaLocked(w http.ResponseWriter, idx uint64) {
	if idx == 0 {
		idx = 1
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(idx, 10))
	g := &s.consul.g
	w.Header().Set("X-Consul-KnownLeader", strconv.FormatBool(g.leader != nil))
	var last int64
	if g.leader == nil && !g.leaderLost.IsZero() {
		last = time.Since(g.leaderLost).Milliseconds()
	}
	w.Header().Set("X-Consul-LastContact", strconv.FormatInt(last, 10))
}

// auxListenersLocked are the Consul and Vault listeners, for Close.
func (s *Sim) auxListenersLocked() []*listener {
	var out []*listener
	for _, l := range s.consul.lis {
		out = append(out, l)
	}
	for _, l := range s.vault.lis {
		out = append(out, l)
	}
	for _, l := range []*listener{s.consul.cluster, s.vault.cluster} {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

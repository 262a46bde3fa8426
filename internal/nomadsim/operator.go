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
// Model. The servers built by New are Raft voters. Membership, leadership and
// health follow raftsim (the model Consul's and Vault's servers share): a server is
// "following" when it is up (Serf alive), not stalled (SetServerHealthy false) and
// done catching up after a boot (Config.ServerStabilizeTime), while there is a
// leader; losing the leader (host down, stalled leader after ElectionTime, quorum
// lost) leaves the cluster without a leader until an election after
// Config.ElectionTime. Every leader change starts a new term, is a Raft write (the
// index moves), is logged as EventLeader, wakes every blocking query and restarts
// the heartbeat timers and lock timers (heartbeat.go, locks.go).
//
// Autopilot (raftsim autopilot.go). A new leader's autopilot starts with an empty
// state; cleanup_dead_servers (on by default, Config.KeepDeadServers turns it
// off) removes a server that is down at a reconcile pass, and when it is back the
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

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// EventServerHealth records a server stalling or recovering (SetServerHealthy) or
// becoming healthy after catching up. Details: "healthy" = "true"/"false".
const EventServerHealth = "server.health"

// implicitServerAddr is the Raft address of the implicit server.
const implicitServerAddr = "127.0.0.1:4647"

// serverState is the Nomad servers' Raft cluster. Its members are the hosts'
// ServerInfo (Raft ID, name, address); its index is the emulator's own.
type serverState struct {
	*raftsim.Cluster
	version string // the servers' Nomad version (Config.NomadVersion)
}

func (st *serverState) init(s *Sim, env simEnv) {
	rc := s.cfg.raftConfig()
	rc.Product, rc.LeaderEvent, rc.HealthEvent = "nomad", EventLeader, EventServerHealth
	rc.DownEvent, rc.UpEvent, rc.LeaderEventIndex = EventServerDown, EventServerUp, true
	// Nomad 1.9 to 2.0 embed raft-autopilot v0.1.6, whose Start computes the
	// state before the new leader serves (raftsim autopilot.go).
	rc.StateAtStart = true
	rc.OnLeader = s.leaderChangedLocked
	rc.StandIn = func() *raftsim.Member {
		return &raftsim.Member{ID: s.uuidLocked(), Name: "nomadsim." + s.cfg.Region, Addr: implicitServerAddr}
	}
	st.Cluster = raftsim.New(env, rc)
	st.version = s.cfg.NomadVersion
}

// leaderChangedLocked is what a leader change does to the rest of the cluster:
// every blocking query re-runs (on the new leader, or to answer "No cluster
// leader"), the lock timers restart (locks.go), and a new leader starts the nodes'
// heartbeat timers, with the failover TTL after a leader change (heartbeat.go
// initializeHeartbeatTimers); without a leader none runs (clearAllHeartbeatTimers).
func (s *Sim) leaderChangedLocked(elected bool) {
	s.topics.allLocked()
	s.vars.leaderChangedLocked(s, elected)
	if elected {
		s.cluster.leaderElectedLocked(s, s.servers.Term() > 1)
	} else {
		s.cluster.leaderLostLocked(s)
	}
}

// addLocked adds a server host to the Raft configuration (a configuration change
// is a Raft write). The first server host replaces the implicit server.
func (st *serverState) addLocked(h *Host) {
	if h.Server == nil {
		return
	}
	st.Add(&raftsim.Member{ID: h.Server.ID, Name: h.Server.Name, Addr: h.Server.RaftAddr, Host: h.Name}, h.Up)
}

// leaderLocked is the Raft ID of the leader; "" when there is none.
func (st *serverState) leaderLocked() string {
	if l := st.Leader(); l != nil {
		return l.ID
	}
	return ""
}

// peersLocked are the Raft addresses of the configuration (/v1/status/peers).
func (st *serverState) peersLocked() []string {
	out := []string{}
	for _, m := range st.Members() {
		out = append(out, m.Addr)
	}
	return out
}

// SetLeaderLost makes the cluster lose its leader (true): reads that do not allow
// stale results and every write fail with 500 "No cluster leader", stale reads
// report KnownLeader=false. false elects a leader again at once (if a quorum is up).
func (s *Sim) SetLeaderLost(lost bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.servers
	st.SetWithheld(lost)
	if lost {
		st.ClearLeader("leader lost (injected)")
		return nil
	}
	st.Elect()
	if st.Leader() == nil {
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
	if err := s.hostLocked(host); err != nil {
		return err
	}
	m := s.servers.ByHost(host)
	if m == nil {
		return fmt.Errorf("host %q runs no Nomad server", host)
	}
	s.servers.SetStalled(m, !healthy)
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
		simhttp.WriteError(w, http.StatusNotFound, "Invalid method")
		return
	}
	if _, err := parseQuery(r); err != nil {
		simhttp.WriteErr(w, err)
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
		out := s.servers.autopilotHealthLocked()
		code := http.StatusOK
		if !out.Healthy {
			code = http.StatusTooManyRequests
		}
		return code, out, nil
	}()
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeJSON(w, code, out)
}

// autopilotHealthLocked is what the leader's autopilot reports
// (nomad/operator_endpoint.go ServerHealth → nomad/autopilot.go
// GetClusterHealth): healthLocked, which a new leader computes as its autopilot
// starts (raftsim Config.StateAtStart), so the empty, unhealthy answer of an
// autopilot without a first pass does not occur for Nomad.
func (st *serverState) autopilotHealthLocked() *api.OperatorHealthReply {
	if !st.AutopilotReady() {
		return &api.OperatorHealthReply{Voters: []string{}, Servers: []api.ServerHealth{}}
	}
	return st.healthLocked()
}

// healthLocked is GetClusterHealth (nomad/autopilot.go) on raftsim's state.
func (st *serverState) healthLocked() *api.OperatorHealthReply {
	h := st.Health()
	out := &api.OperatorHealthReply{Healthy: h.Healthy, FailureTolerance: h.FailureTolerance,
		Leader: st.leaderLocked(), Voters: h.Voters}
	for _, v := range h.Servers {
		m := v.Member
		sh := api.ServerHealth{
			ID: m.ID, Name: m.Name, Address: m.Addr, SerfStatus: "alive", Version: st.version,
			Leader: v.Leader, Voter: m.Voter(), Healthy: m.Healthy(),
			StableSince: v.StableSince.Round(time.Second).UTC(),
			LastContact: v.LastContact, LastTerm: v.LastTerm, LastIndex: v.LastIndex,
		}
		if !m.Up() {
			sh.SerfStatus = "failed"
		}
		out.Servers = append(out.Servers, sh)
	}
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
		simhttp.WriteErr(w, err)
		return
	}
	out, err := func() (*api.RaftConfiguration, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := &s.servers
		if !qp.stale && st.Leader() == nil {
			return nil, errNoLeader
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return nil, err
		}
		if !tok.Management {
			return nil, errPermissionDenied
		}
		out := &api.RaftConfiguration{Index: st.ConfigIndex(), Servers: []*api.RaftServer{}}
		for _, m := range st.Members() {
			out.Servers = append(out.Servers, &api.RaftServer{
				ID: m.ID, Node: m.Name, Address: m.Addr,
				Leader: m == st.Leader(), Voter: m.Voter(), RaftProtocol: "3",
			})
		}
		return out, nil
	}()
	if err != nil {
		simhttp.WriteErr(w, err)
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
// with exactly one of ?id= or ?address= (transferTarget). Without a leader the
// forward fails first (nomad/rpc.go getLeaderForRPC → 500 "No cluster leader"; the
// 503 of TransferLeadershipToPeer is only reached when leadership is lost in
// between, which cannot happen here). Then management, the peer lookup (400), Noop
// for the current leader, and the transfer. A target that is down or stalled never
// catches up: raft times out three times (leadershipTransferToServer) → 500.
func (s *Sim) handleTransferLeadership(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
		return
	}
	match, err := transferTarget(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	out, err := func() (*leadershipTransferResponse, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := &s.servers
		from := st.Leader()
		if from == nil {
			return nil, errNoLeader
		}
		tok, err := s.tokenLocked(r)
		if err != nil {
			return nil, err
		}
		if !tok.Management {
			return nil, errPermissionDenied
		}
		out := &leadershipTransferResponse{From: raftIDAddress{Address: from.Addr, ID: from.ID}}
		var target *raftsim.Member
		for _, m := range st.Members() {
			if match.matches(m) {
				target = m
				break
			}
		}
		if target == nil {
			return nil, match.notFound()
		}
		out.To = raftIDAddress{Address: target.Addr, ID: target.ID}
		if target == from {
			out.Noop = true
			return out, nil
		}
		if !target.Participating() || target.Stalled() || !target.Voter() {
			return nil, errors.New("failed to transfer leadership in 3 attempts. last error: leadership transfer timeout")
		}
		st.Transfer(target)
		return out, nil
	}()
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// peerMatch names the target of a leadership transfer by Raft ID or address.
type peerMatch struct {
	id, addr string
	byID     bool
}

func (p peerMatch) matches(m *raftsim.Member) bool {
	if p.byID {
		return m.ID == p.id
	}
	return m.Addr == p.addr
}

func (p peerMatch) notFound() error {
	if p.byID {
		return simhttp.Code(http.StatusBadRequest, "id %q was not found in the Raft configuration", p.id)
	}
	return simhttp.Code(http.StatusBadRequest, "address %q was not found in the Raft configuration", p.addr)
}

// transferTarget reads exactly one of ?id= or ?address=
// (command/agent/operator_endpoint.go OperatorRaftTransferLeadership): 400 otherwise.
func transferTarget(r *http.Request) (peerMatch, error) {
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
		return peerMatch{}, simhttp.Code(http.StatusBadRequest, "%s", msg)
	}
	if hasID {
		return peerMatch{id: id[0], byID: true}, nil
	}
	return peerMatch{addr: addr[0]}, nil
}

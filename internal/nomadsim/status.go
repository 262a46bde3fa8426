package nomadsim

// GET /v1/status/leader and /v1/status/peers (command/agent/status_endpoint.go,
// nomad/status_endpoint.go) and GET /v1/agent/members (command/agent/agent_endpoint.go
// AgentMembersRequest → Status.Members).

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

func (s *Sim) registerStatusRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/status/leader", s.handleStatusLeader)
	mux.HandleFunc("/v1/status/peers", s.handleStatusPeers)
	mux.HandleFunc("/v1/agent/members", s.handleAgentMembers)
}

// statusRead runs a Status RPC: no ACL, no index header. The RPC is forwarded to the
// leader unless ?stale is set, so without a leader it fails with 500 "No cluster
// leader" (nomad/rpc.go forward); a stale read is answered from the local view.
func (s *Sim) statusRead(w http.ResponseWriter, r *http.Request, read func() any) {
	if r.Method != http.MethodGet {
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
		return
	}
	qp, err := parseQuery(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	s.mu.Lock()
	if !qp.stale && s.servers.leaderLocked() == "" {
		s.mu.Unlock()
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	out := read()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// handleStatusLeader answers the leader's Raft (RPC) address as a JSON string, ""
// when a stale read finds no leader (Status.Leader: raft.LeaderWithID).
func (s *Sim) handleStatusLeader(w http.ResponseWriter, r *http.Request) {
	s.statusRead(w, r, func() any {
		if l := s.servers.Leader(); l != nil {
			return l.Addr
		}
		return ""
	})
}

// handleStatusPeers answers the Raft addresses of the configuration, [] when empty
// (Status.Peers).
func (s *Sim) handleStatusPeers(w http.ResponseWriter, r *http.Request) {
	s.statusRead(w, r, func() any { return s.servers.peersLocked() })
}

// handleAgentMembers answers GET /v1/agent/members: the Serf members (the servers)
// as the answering server sees them, which needs node:read (Status.Members). It is
// not forwarded to the leader. The answering server is the one on the receiving
// host, else the leader, else the first server.
func (s *Sim) handleAgentMembers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
		return
	}
	if _, err := parseQuery(r); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(false) }) == nil {
		return
	}
	s.mu.Lock()
	st := &s.servers
	all := st.Members()
	var self *raftsim.Member
	if h := requestHost(r); h != nil {
		// A server answers for itself, also one that autopilot removed from
		// the Raft configuration and that is back (Status.Members reads the
		// local Serf).
		self = st.Find(h.Name)
	}
	if self == nil {
		self = st.Leader()
	}
	if self == nil && len(all) > 0 {
		self = all[0]
	}
	out := &api.ServerMembers{ServerRegion: s.cfg.Region, ServerDC: s.cfg.Datacenter, Members: []*api.AgentMember{}}
	if self != nil {
		out.ServerName = strings.TrimSuffix(self.Name, "."+s.cfg.Region)
	}
	for _, e := range all {
		out.Members = append(out.Members, s.serfMemberLocked(e))
	}
	// A server removed by autopilot's dead-server cleanup was force-left from Serf
	// (nomad/autopilot.go RemoveFailedServer → serf RemoveFailedNode): "left" until
	// it is back.
	for _, e := range st.Removed() {
		m := s.serfMemberLocked(e)
		if !e.Up() {
			m.Status = "left"
		}
		out.Members = append(out.Members, m)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// serfMemberLocked is a server's Serf member (nomad/server.go setupSerf tags).
func (s *Sim) serfMemberLocked(e *raftsim.Member) *api.AgentMember {
	ip, port, _ := strings.Cut(e.Addr, ":")
	status := "alive"
	if !e.Up() {
		status = "failed"
	}
	p, _ := strconv.Atoi(port)
	return &api.AgentMember{
		Name: e.Name, Addr: ip, Port: 4648, Status: status,
		Tags: map[string]string{
			"id": e.ID, "region": s.cfg.Region, "dc": s.cfg.Datacenter,
			"rpc_addr": ip, "port": strconv.Itoa(p), "role": "nomad",
			"raft_vsn": "3", "build": s.cfg.NomadVersion, "vsn": "1",
		},
		ProtocolMin: 1, ProtocolMax: 5, ProtocolCur: 2,
		DelegateMin: 2, DelegateMax: 5, DelegateCur: 4,
	}
}

package nomadsim

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"
)

func (s *Sim) registerAgentRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/agent/self", methods(s.handleAgentSelf, http.MethodGet))
}

// handleAgentSelf answers GET /v1/agent/self for the agent that received the request
// (command/agent/agent_endpoint.go AgentSelfRequest). It needs agent:read. No index
// header is sent. A client agent reports its node ID in stats.client.node_id
// (client/client.go Stats); a server reports stats.nomad and a Serf member whose
// Tags.id is its Raft ID (nomad/server.go setupSerf). On a client-only agent
// member is zero-valued. The cluster address answers as the current leader's agent.
func (s *Sim) handleAgentSelf(w http.ResponseWriter, r *http.Request) {
	if s.authorize(w, r, func(t *Token) bool { return t.AllowAgent(false) }) == nil {
		return
	}
	s.mu.Lock()
	h := requestHost(r)
	if h == nil {
		h = s.clusterAgentHostLocked()
	}
	out := s.agentSelfLocked(h)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// clusterAgentHostLocked is the host that the cluster address stands for: the
// leader's, else the first server, else the first host.
func (s *Sim) clusterAgentHostLocked() *Host {
	var first *Host
	for _, h := range s.sortedHostsLocked() {
		if h.Server != nil {
			if h.Server.ID == s.servers.leaderLocked() {
				return h
			}
			if first == nil {
				first = h
			}
		}
	}
	if first == nil && len(s.hostOrder) > 0 {
		first = s.hosts[s.hostOrder[0]]
	}
	return first
}

func (s *Sim) agentSelfLocked(h *Host) *api.AgentSelf {
	out := &api.AgentSelf{
		Config: map[string]any{
			"Region":     s.cfg.Region,
			"Datacenter": s.cfg.Datacenter,
			"ACL":        map[string]any{"Enabled": s.acl.enabled},
		},
		Stats: map[string]map[string]string{
			"runtime": {"arch": "amd64", "version": "go1.26"},
		},
	}
	if h == nil {
		return out
	}
	out.Config["NodeName"] = h.Name
	out.Config["Client"] = map[string]any{"Enabled": h.NodeID != ""}
	out.Config["Server"] = map[string]any{"Enabled": h.Server != nil}
	if h.NodeID != "" {
		out.Stats["client"] = map[string]string{
			"node_id":         h.NodeID,
			"known_servers":   strings.Join(s.servers.peersLocked(), ","),
			"num_allocations": strconv.Itoa(s.cluster.numAllocsLocked(h.NodeID)),
			"last_heartbeat":  "0",
			"heartbeat_ttl":   s.cfg.HeartbeatTTL.String(),
		}
	}
	if h.Server != nil {
		leaderAddr := ""
		isLeader := false
		if lid := s.servers.leaderLocked(); lid != "" {
			for _, o := range s.hosts {
				if o.Server != nil && o.Server.ID == lid {
					leaderAddr = o.Server.RaftAddr
				}
			}
			isLeader = lid == h.Server.ID
		}
		out.Stats["nomad"] = map[string]string{
			"server":        "true",
			"leader":        strconv.FormatBool(isLeader),
			"leader_addr":   leaderAddr,
			"bootstrap":     "false",
			"known_regions": "1",
		}
		ip, port, _ := strings.Cut(h.Server.RaftAddr, ":")
		p, _ := strconv.Atoi(port)
		out.Member = api.AgentMember{
			Name:   h.Server.Name,
			Addr:   ip,
			Port:   4648,
			Status: "alive",
			Tags: map[string]string{
				"id":       h.Server.ID,
				"region":   s.cfg.Region,
				"dc":       s.cfg.Datacenter,
				"rpc_addr": ip,
				"port":     strconv.Itoa(p),
				"role":     "nomad",
				"raft_vsn": "3",
				"build":    simNomadVersion,
			},
		}
	}
	return out
}

// simNomadVersion is the Nomad version the emulator claims to be.
const simNomadVersion = "1.11.0"

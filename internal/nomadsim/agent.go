package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

func (s *Sim) registerAgentRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/agent/self", methods(s.handleAgentSelf, http.MethodGet))
	mux.HandleFunc("/v1/agent/host", methods(s.handleAgentHost, http.MethodGet))
	mux.HandleFunc("/v1/agent/health", methods(s.handleAgentHealth, http.MethodGet))
	mux.HandleFunc("/v1/regions", methods(s.handleRegions, http.MethodGet))
}

// handleRegions answers GET /v1/regions (command/agent/region_endpoint.go
// RegionListRequest, nomad/region_endpoint.go Region.List): the regions the
// server knows of, sorted, with no ACL check. The emulator is one region.
func (s *Sim) handleRegions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []string{s.cfg.Region})
}

// handleAgentSelf answers GET /v1/agent/self for the agent that received the request
// (command/agent/agent_endpoint.go AgentSelfRequest). It needs agent:read. No index
// header is sent. A client agent reports its node ID in stats.client.node_id
// (client/client.go Stats); a server reports stats.nomad and a Serf member whose
// Tags.id is its Raft ID (nomad/server.go setupSerf). On a client-only agent
// member is zero-valued. The cluster address answers as the current leader's agent.
func (s *Sim) handleAgentSelf(w http.ResponseWriter, r *http.Request) {
	if s.authorizeAgent(w, r, func(t *Token) bool { return t.AllowAgent(false) }) == nil {
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
			// The agent's version (command/agent/config.go Config.Version, a
			// version.VersionInfo with no JSON tags).
			"Version": map[string]any{"Version": s.cfg.NomadVersion, "VersionPrerelease": "",
				"VersionMetadata": "", "Revision": "0000000000000000000000000000000000000000"},
		},
		Stats: map[string]map[string]string{
			"runtime": {"arch": "amd64", "version": "go1.26"},
		},
	}
	if h == nil {
		return out
	}
	out.Config["NodeName"] = h.Name
	client := map[string]any{"Enabled": h.NodeID != ""}
	if d := h.DrainOnShutdown; d != nil {
		// The agent's configuration as loaded (ClientConfig.Drain: the HCL
		// strings and bools as written); leave_on_terminate makes it run
		// (selfdrain.go).
		client["Drain"] = map[string]any{"Deadline": d.Deadline.String(), "IgnoreSystemJobs": d.IgnoreSystemJobs, "Force": false}
		out.Config["LeaveOnTerm"] = true
	}
	out.Config["Client"] = client
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
				"build":    s.cfg.NomadVersion,
			},
		}
	}
	return out
}

// handleAgentHealth answers GET /v1/agent/health for the agent that received the
// request (command/agent/agent_endpoint.go HealthRequest). Nomad makes no ACL
// check there, not even of the token (the server's Status.Leader ignores a
// failed authentication: nomad/status_endpoint.go Leader). A client agent
// answers "client" (ok: the emulated clients always know the servers; Nomad's
// "no known servers" is not modelled), a server "server" (not ok, "no leader",
// while the cluster has none), an agent that runs both, both. ?type=client or
// ?type=server (repeatable) asks for those only, failing each the agent does
// not run ("client not enabled", "server not enabled"). An unhealthy answer is
// a 500 whose text body is the same JSON (CodedError(500, json)). The cluster
// address answers as the current leader's agent.
func (s *Sim) handleAgentHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := requestHost(r)
	if h == nil {
		h = s.clusterAgentHostLocked()
	}
	out := s.agentHealthLocked(h, r.URL.Query()["type"])
	s.mu.Unlock()
	ok := (out.Client == nil || out.Client.Ok) && (out.Server == nil || out.Server.Ok)
	if ok {
		writeJSON(w, http.StatusOK, out)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		simhttp.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	simhttp.WriteError(w, http.StatusInternalServerError, string(b))
}

// agentHealthLocked is HealthRequest's healthResponse for h's agent, for the
// types asked (none: every type the agent runs).
func (s *Sim) agentHealthLocked(h *Host, types []string) *api.AgentHealthResponse {
	out := &api.AgentHealthResponse{}
	getClient, getServer := len(types) == 0, len(types) == 0
	for _, t := range types {
		switch t {
		case "client":
			getClient = true
			out.Client = &api.AgentHealth{Ok: false, Message: "client not enabled"}
		case "server":
			getServer = true
			out.Server = &api.AgentHealth{Ok: false, Message: "server not enabled"}
		}
	}
	runsClient := h != nil && h.NodeID != ""
	// A cluster without server hosts is served by the implicit server.
	runsServer := h == nil || h.Server != nil
	if getClient && runsClient {
		out.Client = &api.AgentHealth{Ok: true, Message: "ok"}
	}
	if getServer && runsServer {
		out.Server = &api.AgentHealth{Ok: true, Message: "ok"}
		if s.servers.leaderLocked() == "" {
			out.Server = &api.AgentHealth{Ok: false, Message: "no leader"}
		}
	}
	return out
}

// DefaultNomadVersion is the Nomad version the emulator claims to be unless
// Config.NomadVersion says otherwise.
const DefaultNomadVersion = "1.11.0"

// handleAgentHost answers GET /v1/agent/host (command/agent/agent_endpoint.go
// AgentHostRequest), the host data of `nomad operator debug`: the agent's OS,
// network interfaces, /etc/hosts, resolv.conf, environment and disks. It needs
// agent:read or agent:write (acl/acl.go AllowAgentDebug), from any node: with
// node_id the servers forward it to that node's client, with server_id to that
// server (nomad/client_agent_endpoint.go Agent.Host, findClientConn,
// forwardFor). With ACLs disabled Nomad allows it only with enable_debug, which
// the emulator does not model (Nomad's default is off): 403. Without node_id
// and server_id the local agent answers with the bare HostData, not wrapped in
// a HostDataResponse as the forwarded answers are (as Nomad does).
func (s *Sim) handleAgentHost(w http.ResponseWriter, r *http.Request) {
	if s.authorizeAgent(w, r, func(t *Token) bool { return s.acl.enabled && t.AllowAgent(false) }) == nil {
		return
	}
	q := r.URL.Query()
	nodeID, serverID := q.Get("node_id"), q.Get("server_id")
	if nodeID != "" && serverID != "" {
		simhttp.WriteError(w, http.StatusBadRequest, "Can only forward to either client node or server")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case nodeID != "":
		sn, ok := s.cluster.nodes[nodeID]
		switch {
		case !ok:
			simhttp.WriteErr(w, simhttp.Code(http.StatusNotFound, "Unknown node %q", nodeID))
		case !clientConnected(sn):
			simhttp.WriteErr(w, simhttp.Code(http.StatusNotFound, "No path to node"))
		default:
			writeJSON(w, http.StatusOK, &api.HostDataResponse{AgentID: nodeID, HostData: hostData(sn.host)})
		}
	case serverID != "":
		h := s.serverHostLocked(serverID)
		if h == nil {
			simhttp.WriteErr(w, fmt.Errorf("unknown nomad server %s", serverID))
			return
		}
		writeJSON(w, http.StatusOK, &api.HostDataResponse{AgentID: h.Server.Name, HostData: hostData(h)})
	default:
		h := requestHost(r)
		if h == nil {
			h = s.clusterAgentHostLocked()
		}
		writeJSON(w, http.StatusOK, hostData(h))
	}
}

// serverHostLocked is the host of the Nomad server named by id: its Raft ID, its
// member name, or "leader" (nomad/client_agent_endpoint.go forwardFor).
func (s *Sim) serverHostLocked(id string) *Host {
	leader := s.servers.leaderLocked()
	for _, h := range s.sortedHostsLocked() {
		if h.Server != nil && (h.Server.ID == id || h.Server.Name == id || id == "leader" && h.Server.ID == leader) {
			return h
		}
	}
	return nil
}

// hostData is a simulated host's answer to /v1/agent/host (command/agent/host
// host.go MakeHostData).
func hostData(h *Host) *api.HostData {
	out := &api.HostData{OS: "Linux", Environment: map[string]string{}, Disk: map[string]api.DiskUsage{}}
	if h == nil {
		return out
	}
	ip, _, _ := strings.Cut(h.Addr, ":")
	out.Network = []map[string]string{{"interface": "eth0", "address": ip}}
	out.Hosts = "127.0.0.1 localhost\n" + ip + " " + h.Name + "\n"
	out.Environment["HOSTNAME"] = h.Name
	out.Disk["/"] = api.DiskUsage{DiskMB: 102400, UsedMB: 20480}
	return out
}

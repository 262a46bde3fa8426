package consulsim

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

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// route is one Consul endpoint: the method it serves and its handler, which
// answers as the agent on host.
type route struct {
	method string
	serve  func(c *Cluster, w http.ResponseWriter, r *http.Request, host string)
}

// healthNodePrefix is the one endpoint with the node in its path.
const healthNodePrefix = "/v1/health/node/"

// routes are the Consul endpoints by path (package comment).
var routes = map[string]route{
	"/v1/operator/autopilot/health":     {http.MethodGet, (*Cluster).autopilotHealth},
	"/v1/operator/autopilot/state":      {http.MethodGet, (*Cluster).autopilotState},
	"/v1/operator/raft/configuration":   {http.MethodGet, (*Cluster).raftConfiguration},
	"/v1/operator/raft/transfer-leader": {http.MethodPost, (*Cluster).transferLeader},
	"/v1/status/leader":                 {http.MethodGet, (*Cluster).statusLeader},
	"/v1/status/peers":                  {http.MethodGet, (*Cluster).statusPeers},
	"/v1/agent/self":                    {http.MethodGet, (*Cluster).agentSelf},
	"/v1/agent/checks":                  {http.MethodGet, (*Cluster).agentChecksHTTP},
	"/v1/agent/maintenance":             {http.MethodPut, (*Cluster).maintenance},
	"/v1/acl/token/self":                {http.MethodGet, (*Cluster).aclDisabled},
	healthNodePrefix:                    {http.MethodGet, (*Cluster).healthNode},
}

// Serve answers a Consul request as the agent on host. It takes the state lock.
func (c *Cluster) Serve(w http.ResponseWriter, r *http.Request, host string) {
	rt, ok := routes[r.URL.Path]
	if !ok && strings.HasPrefix(r.URL.Path, healthNodePrefix) {
		rt, ok = routes[healthNodePrefix]
	}
	if !ok {
		simhttp.WriteError(w, http.StatusNotFound, "404 page not found")
		return
	}
	if r.Method != rt.method {
		// agent/http.go's MethodNotAllowedError.
		simhttp.WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method))
		return
	}
	rt.serve(c, w, r, host)
}

// ---- answers ----------------------------------------------------------------------

var errNoLeader = simhttp.Code(http.StatusInternalServerError, "No cluster leader")

func stale(r *http.Request) bool {
	_, ok := r.URL.Query()["stale"]
	return ok
}

func serfStatus(m *raftsim.Member) string {
	if m.Up() {
		return "alive"
	}
	return "failed"
}

// leaderHealth is the leader's autopilot state: empty and unhealthy before a new
// leader's first pass (raftsim autopilot.go).
func (c *Cluster) leaderHealth() raftsim.Health {
	if !c.raft.AutopilotReady() {
		return raftsim.Health{Voters: []string{}}
	}
	return c.raft.Health()
}

// ---- operator and status -----------------------------------------------------------

// autopilotHealth: OperatorServerHealth. The RPC goes to the leader (500 "No
// cluster leader" without one); 429 with the same body when unhealthy.
func (c *Cluster) autopilotHealth(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	if c.raft.Leader() == nil {
		c.env.Unlock()
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	h := c.leaderHealth()
	out := consulapi.OperatorHealthReply{Healthy: h.Healthy, FailureTolerance: h.FailureTolerance, Servers: []consulapi.ServerHealth{}}
	for _, v := range h.Servers {
		m := v.Member
		out.Servers = append(out.Servers, consulapi.ServerHealth{
			ID: m.ID, Name: m.Name, Address: m.Addr, SerfStatus: serfStatus(m),
			Version: Version, Leader: v.Leader,
			LastContact: consulapi.NewReadableDuration(v.LastContact),
			LastTerm:    v.LastTerm, LastIndex: v.LastIndex, Healthy: m.Healthy(), Voter: m.Voter(),
			StableSince: v.StableSince.Round(time.Second).UTC(),
		})
	}
	c.env.Unlock()
	code := http.StatusOK
	if !h.Healthy {
		code = http.StatusTooManyRequests
	}
	simhttp.WriteJSON(w, code, out)
}

// autopilotState: OperatorAutopilotState (agent/operator_endpoint.go
// autopilotToAPIState): Servers keyed by ID with Status leader/voter/non-voter.
func (c *Cluster) autopilotState(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	l := c.raft.Leader()
	if l == nil {
		c.env.Unlock()
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	h := c.leaderHealth()
	leader := l.ID
	if !c.raft.AutopilotReady() {
		leader = ""
	}
	out := consulapi.AutopilotState{Healthy: h.Healthy, FailureTolerance: h.FailureTolerance,
		Servers: map[string]consulapi.AutopilotServer{}, Leader: leader, Voters: h.Voters}
	for _, v := range h.Servers {
		m := v.Member
		st := consulapi.AutopilotServerVoter
		switch {
		case v.Leader:
			st = consulapi.AutopilotServerLeader
		case !m.Voter():
			st = consulapi.AutopilotServerNonVoter
		}
		out.Servers[m.ID] = consulapi.AutopilotServer{
			ID: m.ID, Name: m.Name, Address: m.Addr, NodeStatus: serfStatus(m),
			Version: Version, LastContact: consulapi.NewReadableDuration(v.LastContact),
			LastTerm: v.LastTerm, LastIndex: v.LastIndex, Healthy: m.Healthy(),
			StableSince: v.StableSince.Round(time.Second).UTC(), Status: st,
			Meta: map[string]string{"consul-network-segment": ""}, NodeType: consulapi.AutopilotTypeVoter,
		}
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// raftConfiguration: OperatorRaftConfiguration; ?stale answers without a leader.
func (c *Cluster) raftConfiguration(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	if c.raft.Leader() == nil && !stale(r) {
		c.env.Unlock()
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	out := consulapi.RaftConfiguration{Index: c.raft.ConfigIndex(), Servers: []*consulapi.RaftServer{}}
	for _, v := range c.raft.Health().Servers {
		m := v.Member
		out.Servers = append(out.Servers, &consulapi.RaftServer{ID: m.ID, Node: m.Name,
			Address: m.Addr, Leader: v.Leader, Voter: m.Voter(), ProtocolVersion: "3",
			LastIndex: v.LastIndex})
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// transferLeader: Operator.RaftLeaderTransfer. Without id raft picks the most
// up-to-date follower (raft.go pickServer); transferring to the leader itself fails
// ("cannot transfer leadership to itself"); a target that is not following never
// catches up and the transfer times out.
func (c *Cluster) transferLeader(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	err := c.transferTo(r.URL.Query().Get("id"))
	c.env.Unlock()
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, consulapi.TransferLeaderResponse{Success: true})
}

func (c *Cluster) transferTo(id string) error {
	rc := c.raft
	if rc.Leader() == nil {
		return errNoLeader
	}
	var target *raftsim.Member
	if id == "" {
		for _, m := range rc.Members() {
			if m.Voter() && rc.Following(m) {
				target = m
				break
			}
		}
		if target == nil {
			return errors.New("cannot find peer")
		}
	} else {
		target = rc.ByID(id)
		if target == nil {
			return simhttp.Code(http.StatusBadRequest, "id %q was not found in the Raft configuration", id)
		}
		if target == rc.Leader() {
			return errors.New("cannot transfer leadership to itself")
		}
		if !target.Voter() || !target.Participating() || target.Stalled() {
			return errors.New("leadership transfer timeout")
		}
	}
	rc.Transfer(target)
	return nil
}

// statusLeader: Status.Leader, the leader's server RPC address or "".
func (c *Cluster) statusLeader(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	out := ""
	if l := c.raft.Leader(); l != nil {
		out = l.Addr
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// aclDisabled answers the ACL endpoints as an agent whose ACLs are off, as the
// emulated cluster's are (every token may do everything): 401 "ACL support
// disabled" (agent/acl_endpoint.go aclDisabled, checkACLDisabled).
func (c *Cluster) aclDisabled(w http.ResponseWriter, _ *http.Request, _ string) {
	simhttp.WriteError(w, http.StatusUnauthorized, "ACL support disabled")
}

// statusPeers: Status.Peers, the Raft addresses of the configuration.
func (c *Cluster) statusPeers(w http.ResponseWriter, r *http.Request, _ string) {
	c.env.Lock()
	if c.raft.Leader() == nil && !stale(r) {
		c.env.Unlock()
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	out := []string{}
	for _, m := range c.raft.Members() {
		out = append(out, m.Addr)
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// ---- the local agent ---------------------------------------------------------------

// agentSelf: AgentSelf, {Config, DebugConfig, Coord, Member, Stats, Meta, xDS};
// the values of Stats are strings (agent.go Stats).
func (c *Cluster) agentSelf(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	m, l := c.raft.Find(host), c.raft.Leader()
	leader, leaderAddr, raftState := "false", "", "Candidate"
	if l != nil {
		leaderAddr, raftState = l.Addr, "Follower"
		if l == m {
			leader, raftState = "true", "Leader"
		}
	}
	ip, _, _ := strings.Cut(m.Addr, ":")
	dc, nodeID := c.cfg.Datacenter, c.NodeID(host)
	out := map[string]any{
		"Config": map[string]any{
			"Datacenter": dc, "PrimaryDatacenter": dc,
			"NodeName": host, "NodeID": nodeID, "Partition": "",
			"Revision": "", "Server": true, "Version": Version, "BuildDate": "2025-01-01T00:00:00Z",
		},
		"DebugConfig": map[string]any{"ServerMode": true, "NodeName": host, "Datacenter": dc},
		"Coord":       nil,
		"Member": map[string]any{
			"Name": host, "Addr": ip, "Port": 8301, "Status": 1,
			"Tags": map[string]string{"role": "consul", "dc": dc, "id": nodeID,
				"port": "8300", "vsn": "2", "build": Version, "raft_vsn": "3"},
		},
		"Stats": map[string]any{
			"agent":  map[string]string{"check_monitors": "0", "checks": fmt.Sprint(len(c.agentChecks(host))), "services": "0"},
			"consul": map[string]string{"server": "true", "leader": leader, "leader_addr": leaderAddr, "bootstrap": "false", "known_datacenters": "1"},
			"raft":   map[string]string{"state": raftState, "term": fmt.Sprint(c.raft.Term()), "last_log_index": fmt.Sprint(c.index)},
		},
		"Meta": map[string]string{"consul-network-segment": ""},
		"xDS":  nil,
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

func (c *Cluster) agentChecksHTTP(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	out := c.agentChecks(host)
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// maintenance: AgentNodeMaintenance. enable missing → 400 "Missing value for
// enable", not a bool → 400 "Invalid value for enable: ..."; enabling registers the
// critical check with persist=true (re-enabling is a no-op); disabling removes it.
// Success is 200 with an empty body.
func (c *Cluster) maintenance(w http.ResponseWriter, r *http.Request, host string) {
	q := r.URL.Query()
	if _, ok := q["enable"]; !ok {
		simhttp.WriteError(w, http.StatusBadRequest, "Missing value for enable")
		return
	}
	enable, err := strconv.ParseBool(q.Get("enable"))
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value for enable: %q", q.Get("enable")))
		return
	}
	reason := q.Get("reason")
	if reason == "" {
		reason = defaultNodeMaintReason
	}
	c.env.Lock()
	defer c.env.Unlock()
	a := c.agents[host]
	if enable == (a.maint != nil) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := a.persistMaint(enable, reason); err != nil {
		simhttp.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	c.ChecksChanged()
	c.env.Event(EventMaintenance, host, map[string]string{"enabled": fmt.Sprint(enable), "reason": q.Get("reason")})
	w.WriteHeader(http.StatusOK)
}

// persistMaint registers (and persists) or removes the maintenance check.
func (a *agent) persistMaint(enable bool, reason string) error {
	file := a.maintFile()
	if !enable {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		a.maint = nil
		return nil
	}
	b, _ := json.Marshal(maint{Reason: reason})
	err := os.MkdirAll(filepath.Dir(file), 0o755)
	if err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		return err
	}
	a.maint = &maint{Reason: reason}
	return nil
}

// ---- the catalog -------------------------------------------------------------------

// healthNode: HealthNodeChecks, a blocking query on the checks table. The
// catalog has serfHealth (critical while the agent is down, leader.go
// handleFailedMember) and the synced agent checks; an unknown node gives []. While
// the agent is down its last synced checks stay in the catalog.
func (c *Cluster) healthNode(w http.ResponseWriter, r *http.Request, _ string) {
	node := strings.TrimPrefix(r.URL.Path, healthNodePrefix)
	minIndex, wait, err := blockingParams(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	stale := stale(r)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		c.env.Lock()
		if c.raft.Leader() == nil && !stale {
			c.env.Unlock()
			simhttp.WriteErr(w, errNoLeader)
			return
		}
		n, known := c.catalogNode(node)
		// The checks follow both the catalog's index and the node's
		// allocations (a Nomad index): their sum moves when either does.
		idx := c.catalogIndex + n.ChecksIndex
		ch, closed := c.env.Watch()
		if minIndex == 0 || idx > minIndex || closed {
			out := consulapi.HealthChecks{}
			if known {
				out = c.nodeChecks(node, n, idx)
			}
			c.setMeta(w, idx)
			c.env.Unlock()
			simhttp.WriteJSON(w, http.StatusOK, out)
			return
		}
		c.env.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			minIndex = 0
		case <-r.Context().Done():
			return
		}
	}
}

// blockingParams reads index and wait (agent/http.go parseWait: default 5m
// defaultQueryTime, capped at 10m).
func blockingParams(r *http.Request) (minIndex uint64, wait time.Duration, err error) {
	q := r.URL.Query()
	if v := q.Get("index"); v != "" {
		if minIndex, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, simhttp.Code(http.StatusBadRequest, "Invalid index")
		}
	}
	wait = 5 * time.Minute
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, 0, simhttp.Code(http.StatusBadRequest, "Invalid wait time")
		}
		wait = min(d, 10*time.Minute)
	}
	return minIndex, wait, nil
}

// catalogNode is the node named node if the catalog knows it: a Consul server's
// host, or a Nomad client's (it runs a Consul agent too).
func (c *Cluster) catalogNode(node string) (Node, bool) {
	n, ok := c.env.Node(node)
	if !ok || (c.raft.ByHost(node) == nil && !n.Client) {
		return Node{}, false
	}
	return n, true
}

// nodeChecks are the checks of a known node: serfHealth, the agent's checks and
// the service checks of its allocations.
func (c *Cluster) nodeChecks(node string, n Node, idx uint64) consulapi.HealthChecks {
	ix := checkIx{create: 1, modify: 1}
	if a := c.agents[node]; a != nil {
		ix = a.checks
	}
	serf := &consulapi.HealthCheck{Node: node, CheckID: "serfHealth", Name: "Serf Health Status",
		Status: consulapi.HealthPassing, Output: "Agent alive and reachable",
		CreateIndex: ix.create, ModifyIndex: ix.modify}
	if !n.Up {
		serf.Status, serf.Output = consulapi.HealthCritical, "Agent not live or unreachable"
	}
	out := consulapi.HealthChecks{serf}
	for _, ac := range c.agentChecks(node) {
		out = append(out, &consulapi.HealthCheck{Node: node, CheckID: ac.CheckID, Name: ac.Name,
			Status: ac.Status, Notes: ac.Notes, Type: ac.Type, ServiceTags: []string{},
			CreateIndex: idx, ModifyIndex: idx})
	}
	return append(out, n.Checks...)
}

// setMeta sets agent/http.go setMeta's headers: X-Consul-Index (never 0:
// setIndex bumps 0 to 1), X-Consul-KnownLeader and X-Consul-LastContact (ms).
func (c *Cluster) setMeta(w http.ResponseWriter, idx uint64) {
	if idx == 0 {
		idx = 1
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(idx, 10))
	w.Header().Set("X-Consul-KnownLeader", strconv.FormatBool(c.raft.Leader() != nil))
	var last int64
	if lost := c.raft.LeaderLost(); c.raft.Leader() == nil && !lost.IsZero() {
		last = time.Since(lost).Milliseconds()
	}
	w.Header().Set("X-Consul-LastContact", strconv.FormatInt(last, 10))
}

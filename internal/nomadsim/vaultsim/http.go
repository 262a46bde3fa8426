package vaultsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-secure-stdlib/parseutil"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// route is one Vault endpoint: the methods it serves and its handler, which
// answers as the node on host.
type route struct {
	methods []string
	serve   func(c *Cluster, w http.ResponseWriter, r *http.Request, host string)
}

// routes are the Vault endpoints by path (package comment).
var routes = map[string]route{
	"/v1/sys/health":                       {[]string{http.MethodGet, http.MethodHead}, (*Cluster).health},
	"/v1/sys/seal-status":                  {[]string{http.MethodGet}, (*Cluster).sealStatus},
	"/v1/sys/leader":                       {[]string{http.MethodGet}, (*Cluster).leader},
	"/v1/sys/step-down":                    {[]string{http.MethodPut, http.MethodPost}, (*Cluster).stepDown},
	"/v1/sys/capabilities-self":            {[]string{http.MethodPut, http.MethodPost}, (*Cluster).capabilitiesSelf},
	"/v1/sys/storage/raft/autopilot/state": {[]string{http.MethodGet}, (*Cluster).autopilotState},
}

// Serve answers a Vault request as the node on host. It takes the state lock.
func (c *Cluster) Serve(w http.ResponseWriter, r *http.Request, host string) {
	rt, ok := routes[r.URL.Path]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound)
	case !slices.Contains(rt.methods, r.Method):
		writeError(w, http.StatusMethodNotAllowed)
	default:
		rt.serve(c, w, r, host)
	}
}

// writeError is logical.RespondError: {"errors":[...]}.
func writeError(w http.ResponseWriter, code int, msgs ...string) {
	if msgs == nil {
		msgs = []string{}
	}
	simhttp.WriteJSON(w, code, map[string][]string{"errors": msgs})
}

// healthCodes are sys/health's default codes by override parameter.
var healthCodes = map[string]int{"uninitcode": 501, "sealedcode": 503, "standbycode": 429,
	"activecode": 200, "drsecondarycode": 472, "performancestandbycode": 473,
	"removedcode": 530, "haunhealthycode": 474}

// healthParams reads sys/health's parameters (fetchStatusCode, parseutil.ParseBool):
// ok=false for a code that is not an integer or a bad bool (400).
func healthParams(r *http.Request) (codes map[string]int, standbyOK, ok bool) {
	q := r.URL.Query()
	boolParam := func(name string) (bool, bool) {
		v, found := q[name]
		if !found {
			return false, true
		}
		b, err := parseutil.ParseBool(v[0])
		return b, err == nil
	}
	standbyOK, ok1 := boolParam("standbyok")
	_, ok2 := boolParam("perfstandbyok") // CE has no performance standbys
	if !ok1 || !ok2 {
		return nil, false, false
	}
	codes = map[string]int{}
	for f, def := range healthCodes {
		codes[f] = def
		if v, found := q[f]; found {
			n, err := strconv.Atoi(v[0])
			if err != nil {
				return nil, false, false
			}
			codes[f] = n
		}
	}
	return codes, standbyOK, true
}

func (c *Cluster) health(w http.ResponseWriter, r *http.Request, host string) {
	codes, standbyOK, ok := healthParams(r)
	if !ok {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		writeError(w, http.StatusBadRequest)
		return
	}
	c.env.Lock()
	body := c.healthBody(host)
	c.env.Unlock()
	code := codes["activecode"]
	switch {
	case !body.Initialized:
		code = codes["uninitcode"]
	case *body.RemovedFromCluster:
		code = codes["removedcode"]
	case body.Sealed:
		code = codes["sealedcode"]
	case body.HAConnectionHealthy != nil && !*body.HAConnectionHealthy:
		code = codes["haunhealthycode"]
	case body.Standby && !standbyOK:
		code = codes["standbycode"]
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		return
	}
	simhttp.WriteJSON(w, code, body)
}

// healthBody is the node's sys/health answer.
func (c *Cluster) healthBody(host string) vaultapi.HealthResponse {
	n := c.nodes[host]
	init := !n.uninit
	sealed := n.sealed || n.uninit
	standby := n.m != c.raft.Leader()
	removed := false
	var haHealthy *bool
	var lastHB int64
	if init && !sealed && standby {
		// A standby heartbeats the active node over request forwarding
		// (GetHAHeartbeatHealth); without an active node, or stalled, it cannot.
		ok := c.raft.Leader() != nil && !n.m.Stalled()
		haHealthy = &ok
		if !ok {
			lastHB = time.Since(n.m.LastContact()).Milliseconds()
		}
	}
	body := vaultapi.HealthResponse{
		Initialized: init, Sealed: sealed, Standby: standby,
		ReplicationPerformanceMode: "disabled", ReplicationDRMode: "disabled",
		ServerTimeUTC: time.Now().UTC().Unix(), Version: Version,
		RemovedFromCluster: &removed, HAConnectionHealthy: haHealthy,
		LastRequestForwardingHeartbeatMillis: lastHB,
	}
	if !sealed {
		body.ClusterName, body.ClusterID = "vault-cluster-"+c.clusterID[:8], c.clusterID
	}
	if !sealed && !standby {
		body.LastWAL = c.index
	}
	return body
}

func (c *Cluster) sealStatus(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	n := c.nodes[host]
	removed := false
	out := vaultapi.SealStatusResponse{
		Type: "shamir", Initialized: !n.uninit, Sealed: n.sealed || n.uninit, T: 3, N: 5,
		Version: Version, BuildDate: "2025-01-01T00:00:00Z", StorageType: "raft",
		RemovedFromCluster: &removed,
	}
	if c.cfg.AutoUnseal {
		out.Type, out.RecoverySeal, out.RecoverySealType = "awskms", true, "shamir"
	}
	if n.uninit {
		out.T, out.N = 0, 0
	}
	if !out.Sealed {
		out.ClusterName, out.ClusterID = "vault-cluster-"+c.clusterID[:8], c.clusterID
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

func (c *Cluster) leader(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	n := c.nodes[host]
	if n.sealed || n.uninit {
		c.env.Unlock()
		writeError(w, http.StatusServiceUnavailable, "Vault is sealed")
		return
	}
	l := c.raft.Leader()
	out := vaultapi.LeaderResponse{HAEnabled: true, IsSelf: l == n.m,
		RaftCommittedIndex: c.index, RaftAppliedIndex: c.index}
	if l != nil {
		out.ActiveTime = c.raft.LeaderSince().UTC()
		out.LeaderAddress = c.nodes[l.Host].apiAddr
		out.LeaderClusterAddress = "https://" + l.Addr
	}
	if n.m != l && !c.raft.Following(n.m) {
		out.RaftAppliedIndex = n.m.LastIndex()
	}
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, out)
}

// active applies the checks of a request that must reach the active node
// (http/handler.go: sealed, then forwarding, then the token).
func (c *Cluster) active(r *http.Request, host string) (*raftsim.Member, int, string) {
	n := c.nodes[host]
	if n.sealed || n.uninit {
		return nil, http.StatusServiceUnavailable, "Vault is sealed"
	}
	active := c.raft.Leader()
	if active == nil {
		return nil, http.StatusInternalServerError, "local node not active but active cluster node not found"
	}
	if token(r) == "" {
		return nil, http.StatusForbidden, "permission denied"
	}
	return active, 0, ""
}

func token(r *http.Request) string {
	if t := r.Header.Get("X-Vault-Token"); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	return ""
}

// stepDown: the active node gives up the lock and does not take it again for
// StepDownTime; a standby takes it after ElectionTime.
func (c *Cluster) stepDown(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	active, code, msg := c.active(r, host)
	if active == nil {
		c.env.Unlock()
		writeError(w, code, msg)
		return
	}
	c.raft.StepDown(c.cfg.StepDownTime)
	c.env.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// capabilitiesSelf answers sys/capabilities-self (vault/logical_system.go
// handleCapabilities): the token's capabilities on each path asked ("path"
// or "paths"), by path and, for all of them together, as "capabilities". The
// emulated Vault has no policies: any token may do everything, as Vault's
// root token, so each path answers ["root"].
func (c *Cluster) capabilitiesSelf(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	active, code, msg := c.active(r, host)
	reqID := ""
	if active != nil {
		reqID = c.env.UUID()
	}
	c.env.Unlock()
	if active == nil {
		writeError(w, code, msg)
		return
	}
	var body struct {
		Path  string   `json:"path"`
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
		return
	}
	paths := body.Paths
	if body.Path != "" {
		paths = append(paths, body.Path)
	}
	if len(paths) == 0 {
		writeError(w, http.StatusBadRequest, "missing paths")
		return
	}
	data := map[string]any{"capabilities": []string{"root"}}
	for _, p := range paths {
		data[p] = []string{"root"}
	}
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{"request_id": reqID, "lease_id": "", "renewable": false,
		"lease_duration": 0, "data": data, "wrap_info": nil, "warnings": nil, "auth": nil})
}

func (c *Cluster) autopilotState(w http.ResponseWriter, r *http.Request, host string) {
	c.env.Lock()
	active, code, msg := c.active(r, host)
	if active == nil {
		c.env.Unlock()
		writeError(w, code, msg)
		return
	}
	reqID := c.env.UUID()
	data := c.autopilotData(active)
	c.env.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"request_id": reqID, "lease_id": "", "renewable": false, "lease_duration": 0,
		"data": data, "wrap_info": nil, "warnings": nil, "auth": nil, "mount_type": "system",
	})
}

// autopilotData is the active node's autopilot state: empty and unhealthy before
// its first pass (raftsim autopilot.go).
func (c *Cluster) autopilotData(active *raftsim.Member) map[string]any {
	h, leader := c.raft.Health(), active.ID
	if !c.raft.AutopilotReady() {
		h, leader = raftsim.Health{Voters: []string{}}, ""
	}
	nonVoters := []string{}
	servers := map[string]any{}
	for _, v := range h.Servers {
		m := v.Member
		status := "voter"
		switch {
		case v.Leader:
			status = "leader"
		case !m.Voter():
			status = "non-voter"
			nonVoters = append(nonVoters, m.ID)
		}
		servers[m.ID] = map[string]any{
			"id": m.ID, "name": m.Name, "address": m.Addr, "node_status": "alive",
			"last_contact": v.LastContact.String(), "last_term": v.LastTerm, "last_index": v.LastIndex,
			"healthy": m.Healthy(), "stable_since": v.StableSince.UTC().Format(time.RFC3339Nano),
			"status": status, "version": Version, "node_type": "voter",
			"meta": map[string]string{},
		}
	}
	return map[string]any{
		"healthy": h.Healthy, "failure_tolerance": h.FailureTolerance, "leader": leader,
		"voters": h.Voters, "non_voters": nonVoters, "servers": servers,
	}
}

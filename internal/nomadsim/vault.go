package nomadsim

// Vault servers with integrated storage (Raft) co-located with the Nomad servers
// (Config.VaultServers). The active node is the Raft leader (physical/raft RaftLock
// is held by the leader); the Raft/autopilot model is raftGroup (consul.go).
//
// Endpoints (reference §8; Vault http/*.go, api v1.23.0):
//
//   - GET|HEAD /v1/sys/health (http/sys_health.go getSysHealth): unauthenticated,
//     answered by the node itself. Precedence: uninit (501), removed (530), sealed
//     (503), HA-unhealthy standby (474), DR secondary (472), perf standby (473),
//     standby (429 unless standbyok), else active (200); every code can be
//     overridden (uninitcode, removedcode, sealedcode, haunhealthycode,
//     drsecondarycode, performancestandbycode, standbycode, activecode); a code
//     that is not an integer or a bad standbyok/perfstandbyok gives 400.
//   - GET /v1/sys/seal-status (http/sys_seal.go handleSysSealStatus): always 200.
//   - GET /v1/sys/leader (http/sys_leader.go): 503 "Vault is sealed" when sealed.
//   - PUT|POST /v1/sys/step-down (http/sys_seal.go handleSysStepDown): 204;
//     forwarded to the active node; the stepped-down node does not take the lock
//     again for manualStepDownSleepPeriod (vault/ha.go, 10s; Config.VaultStepDownTime).
//   - GET /v1/sys/storage/raft/autopilot/state (vault/logical_system_raft.go
//     handleStorageRaftAutopilotState): 200 with {"data":{...}}; last_contact and
//     stable_since are strings (api decodes with mapstructure).
//
// A request that needs the active node (step-down, autopilot state) gets 503
// "Vault is sealed" on a sealed node, is forwarded by a standby (500 "local node not
// active but active cluster node not found" without an active node), then needs a
// token. ACLs are not modelled: any non-empty X-Vault-Token (or "Authorization:
// Bearer") is accepted; a missing token gives 403 "permission denied".
//
// Seal. Vault starts sealed after a reboot unless Config.VaultAutoUnseal (an auto
// unseal "seal" stanza) is set (vault/core.go: the barrier keys are not kept across
// restarts). A sealed node does not run Raft: for Raft it is like a host that is
// down, but Vault's autopilot keeps its node_status "alive" until the dead-server
// threshold (physical/raft/raft_autopilot.go KnownServers, 24h by default).
//
// Autopilot. Vault's autopilot resets its state when the active node changes and
// promotes stable non-voters like Consul's (autopilot.go), but it never removes
// dead servers by default: its delegate passes CleanupDeadServers=false to
// raft-autopilot (physical/raft/raft_autopilot.go AutopilotConfig), and its own
// cleanup (autopilot_cleanup_dead_servers) is off by default. So a rebooted Vault
// node stays a voter. That option is not modelled (with it, Vault 1.19+ also
// marks a removed node removed_from_cluster, which needs an operator).

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-secure-stdlib/parseutil"
	vaultapi "github.com/hashicorp/vault/api"
)

// Event types of the Vault cluster.
const (
	EventVaultActive   = "vault.active"   // a node became active, or the active node was lost
	EventVaultSealed   = "vault.sealed"   // a node is sealed (boot without auto-unseal, SealVault)
	EventVaultUnsealed = "vault.unsealed" // a node was unsealed (UnsealVault, auto-unseal)
	EventVaultHealth   = "vault.health"   // a Vault server stalled, recovered or caught up
)

// simVaultVersion is the Vault version the emulator claims to be.
const simVaultVersion = "1.20.0"

type vaultState struct {
	g         raftGroup
	cluster   *listener
	lis       map[string]*listener // by host name
	clusterID string
}

func (vs *vaultState) init(s *Sim) {
	vs.g = raftGroup{kind: "vault", leaderEvent: EventVaultActive}
	vs.lis = map[string]*listener{}
}

// addVaultServerLocked starts an initialized, unsealed Vault server on h with its own
// listener; node_id is the host name.
func (s *Sim) addVaultServerLocked(h *Host, n int) error {
	vs := &s.vault
	if vs.clusterID == "" {
		vs.clusterID = s.uuidLocked()
	}
	lis, err := s.listenAux(h, nil, s.serveVault)
	if err != nil {
		return err
	}
	vs.lis[h.Name] = lis
	h.VaultAddr = lis.addr
	ip := fmt.Sprintf("10.0.%d.%d", n/250, n%250+1)
	vs.g.addLocked(s, &raftMember{host: h, id: h.Name, name: h.Name, addr: ip + ":8201",
		apiAddr: "https://" + ip + ":8200", voter: true, up: h.Up})
	if vs.cluster == nil {
		cl, err := s.listenAux(nil, func() *Host { return vs.routeLocked() }, s.serveVault)
		if err != nil {
			return err
		}
		vs.cluster = cl
	}
	return nil
}

// routeLocked is where the cluster address forwards (like active.vault.service):
// the active node, or the first node that is up when there is none.
func (vs *vaultState) routeLocked() *Host {
	if vs.g.leader != nil && vs.g.leader.host.Up {
		return vs.g.leader.host
	}
	for _, m := range vs.g.members {
		if m.host.Up {
			return m.host
		}
	}
	return nil
}

func (s *Sim) vaultHostDownLocked(h *Host) {
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	if m == nil {
		return
	}
	vs.g.leaveLocked(s, m, func() { m.up = false })
}

// vaultHostUpLocked: Vault starts sealed, unless auto-unseal unseals it at start.
func (s *Sim) vaultHostUpLocked(h *Host) {
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	if m == nil {
		return
	}
	m.up = true
	if m.uninit {
		vs.g.changedLocked(s)
		return
	}
	if !s.cfg.VaultAutoUnseal {
		m.sealed = true
		vs.g.changedLocked(s)
		s.eventLocked(Event{Type: EventVaultSealed, Host: h.Name, Details: map[string]string{"reason": "boot"}})
		return
	}
	m.sealed = false
	s.eventLocked(Event{Type: EventVaultUnsealed, Host: h.Name, Details: map[string]string{"reason": "auto-unseal"}})
	vs.g.joinLocked(s, m, EventVaultHealth)
}

func (s *Sim) vaultMemberLocked(host string) (*raftMember, error) {
	h, ok := s.hosts[host]
	if !ok {
		return nil, fmt.Errorf("host %q not found", host)
	}
	m := s.vault.g.byHostLocked(h)
	if m == nil {
		return nil, fmt.Errorf("host %q runs no Vault server", host)
	}
	return m, nil
}

// vaultUpMemberLocked is the Vault node on host, which must be up.
func (s *Sim) vaultUpMemberLocked(host string) (*raftMember, error) {
	m, err := s.vaultMemberLocked(host)
	if err != nil {
		return nil, err
	}
	if !m.up {
		return nil, fmt.Errorf("host %q is down", host)
	}
	return m, nil
}

// SealVault seals the Vault node on host (like "vault operator seal" on it): it
// leaves Raft; an active node loses the lock and the standbys elect a new one.
func (s *Sim) SealVault(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.vaultUpMemberLocked(host)
	if err != nil {
		return err
	}
	if m.sealed {
		return nil
	}
	s.vault.g.leaveLocked(s, m, func() { m.sealed = true })
	s.eventLocked(Event{Type: EventVaultSealed, Host: host, Details: map[string]string{"reason": "injected"}})
	return nil
}

// UnsealVault unseals the Vault node on host (the operator entered the key shares).
// It rejoins Raft and is unhealthy until it caught up (ServerStabilizeTime).
func (s *Sim) UnsealVault(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.vaultUpMemberLocked(host)
	if err != nil {
		return err
	}
	if m.uninit {
		return fmt.Errorf("vault on host %q is not initialized", host)
	}
	if !m.sealed {
		return nil
	}
	m.sealed = false
	s.eventLocked(Event{Type: EventVaultUnsealed, Host: host, Details: map[string]string{"reason": "unseal"}})
	s.vault.g.joinLocked(s, m, EventVaultHealth)
	return nil
}

// SetVaultServerHealthy makes the Vault server on host a stalled node (false): it
// stays unsealed but stops applying the Raft log and cannot heartbeat the active
// node; a stalled active node loses the lock after ElectionTime. true undoes it.
func (s *Sim) SetVaultServerHealthy(host string, healthy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.vaultMemberLocked(host)
	if err != nil {
		return err
	}
	s.vault.g.setStalledLocked(s, m, !healthy, EventVaultHealth)
	return nil
}

// VaultAddress is the URL of the Vault cluster address (as VAULT_ADDR): it forwards
// to the active node. "" when the cluster runs no Vault.
func (s *Sim) VaultAddress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vault.cluster == nil {
		return ""
	}
	return "http://" + s.vault.cluster.addr
}

// VaultActive returns the host of the active Vault node ("" when there is none).
func (s *Sim) VaultActive() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vault.g.leader == nil {
		return ""
	}
	return s.vault.g.leader.host.Name
}

// VaultSealed reports whether the Vault node on host is sealed.
func (s *Sim) VaultSealed(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.vaultMemberLocked(host)
	return err == nil && m.sealed
}

// ---- Vault HTTP ------------------------------------------------------------------

// writeVaultError is logical.RespondError: {"errors":[...]}.
func writeVaultError(w http.ResponseWriter, code int, msgs ...string) {
	if msgs == nil {
		msgs = []string{}
	}
	writeJSON(w, code, map[string][]string{"errors": msgs})
}

func (s *Sim) serveVault(w http.ResponseWriter, r *http.Request, target *Host) {
	switch r.URL.Path {
	case "/v1/sys/health":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeVaultError(w, http.StatusMethodNotAllowed)
			return
		}
		s.vaultHealth(w, r, target)
	case "/v1/sys/seal-status":
		if r.Method != http.MethodGet {
			writeVaultError(w, http.StatusMethodNotAllowed)
			return
		}
		s.vaultSealStatus(w, target)
	case "/v1/sys/leader":
		if r.Method != http.MethodGet {
			writeVaultError(w, http.StatusMethodNotAllowed)
			return
		}
		s.vaultLeader(w, target)
	case "/v1/sys/step-down":
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			writeVaultError(w, http.StatusMethodNotAllowed)
			return
		}
		s.vaultStepDown(w, r, target)
	case "/v1/sys/storage/raft/autopilot/state":
		if r.Method != http.MethodGet {
			writeVaultError(w, http.StatusMethodNotAllowed)
			return
		}
		s.vaultAutopilotState(w, r, target)
	default:
		writeVaultError(w, http.StatusNotFound)
	}
}

// vaultHealthCode reads one override code (fetchStatusCode): absent → def; not an
// integer → ok=false (400).
func vaultHealthCode(r *http.Request, field string, def int) (int, bool) {
	v, found := r.URL.Query()[field]
	if !found {
		return def, true
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		return 0, false
	}
	return n, true
}

func (s *Sim) vaultHealth(w http.ResponseWriter, r *http.Request, h *Host) {
	q := r.URL.Query()
	badRequest := func() {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		writeVaultError(w, http.StatusBadRequest)
	}
	okParam := func(name string) (bool, bool) {
		v, found := q[name]
		if !found {
			return false, true
		}
		b, err := parseutil.ParseBool(v[0])
		return b, err == nil
	}
	standbyOK, ok1 := okParam("standbyok")
	_, ok2 := okParam("perfstandbyok") // CE has no performance standbys
	if !ok1 || !ok2 {
		badRequest()
		return
	}
	codes := map[string]int{"uninitcode": 501, "sealedcode": 503, "standbycode": 429,
		"activecode": 200, "drsecondarycode": 472, "performancestandbycode": 473,
		"removedcode": 530, "haunhealthycode": 474}
	for _, f := range []string{"uninitcode", "sealedcode", "standbycode", "activecode",
		"drsecondarycode", "performancestandbycode", "removedcode", "haunhealthycode"} {
		c, ok := vaultHealthCode(r, f, codes[f])
		if !ok {
			badRequest()
			return
		}
		codes[f] = c
	}

	s.mu.Lock()
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	init := !m.uninit
	sealed := m.sealed || m.uninit
	standby := m != vs.g.leader
	removed := false
	var haHealthy *bool
	var lastHB int64
	if init && !sealed && standby {
		// A standby heartbeats the active node over request forwarding
		// (GetHAHeartbeatHealth); without an active node, or stalled, it cannot.
		ok := vs.g.leader != nil && !m.stalled
		haHealthy = &ok
		if !ok {
			lastHB = time.Since(m.lastContact).Milliseconds()
		}
	}
	code := codes["activecode"]
	switch {
	case !init:
		code = codes["uninitcode"]
	case removed:
		code = codes["removedcode"]
	case sealed:
		code = codes["sealedcode"]
	case haHealthy != nil && !*haHealthy:
		code = codes["haunhealthycode"]
	case standby:
		if !standbyOK {
			code = codes["standbycode"]
		}
	}
	body := vaultapi.HealthResponse{
		Initialized: init, Sealed: sealed, Standby: standby,
		ReplicationPerformanceMode: "disabled", ReplicationDRMode: "disabled",
		ServerTimeUTC: time.Now().UTC().Unix(), Version: simVaultVersion,
		RemovedFromCluster: &removed, HAConnectionHealthy: haHealthy,
		LastRequestForwardingHeartbeatMillis: lastHB,
	}
	if !sealed {
		body.ClusterName, body.ClusterID = "vault-cluster-"+vs.clusterID[:8], vs.clusterID
	}
	if !sealed && !standby {
		body.LastWAL = vs.g.index
	}
	s.mu.Unlock()
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		return
	}
	writeJSON(w, code, body)
}

func (s *Sim) vaultSealStatus(w http.ResponseWriter, h *Host) {
	s.mu.Lock()
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	removed := false
	out := vaultapi.SealStatusResponse{
		Type: "shamir", Initialized: !m.uninit, Sealed: m.sealed || m.uninit, T: 3, N: 5,
		Version: simVaultVersion, BuildDate: "2025-01-01T00:00:00Z", StorageType: "raft",
		RemovedFromCluster: &removed,
	}
	if s.cfg.VaultAutoUnseal {
		out.Type, out.RecoverySeal, out.RecoverySealType = "awskms", true, "shamir"
	}
	if m.uninit {
		out.T, out.N = 0, 0
	}
	if !out.Sealed {
		out.ClusterName, out.ClusterID = "vault-cluster-"+vs.clusterID[:8], vs.clusterID
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) vaultLeader(w http.ResponseWriter, h *Host) {
	s.mu.Lock()
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	if m.sealed || m.uninit {
		s.mu.Unlock()
		writeVaultError(w, http.StatusServiceUnavailable, "Vault is sealed")
		return
	}
	out := vaultapi.LeaderResponse{HAEnabled: true, IsSelf: vs.g.leader == m,
		RaftCommittedIndex: vs.g.index, RaftAppliedIndex: vs.g.index}
	if l := vs.g.leader; l != nil {
		out.ActiveTime = vs.g.leaderSince.UTC()
		out.LeaderAddress = l.apiAddr
		out.LeaderClusterAddress = "https://" + l.addr
	}
	if m != vs.g.leader && !vs.g.followingLocked(m) {
		out.RaftAppliedIndex = m.lastIndex
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// vaultActiveLocked applies the checks of a request that must reach the active node
// (http/handler.go: sealed, then forwarding, then the token).
func (s *Sim) vaultActiveLocked(r *http.Request, h *Host) (*raftMember, int, string) {
	vs := &s.vault
	m := vs.g.byHostLocked(h)
	if m.sealed || m.uninit {
		return nil, http.StatusServiceUnavailable, "Vault is sealed"
	}
	active := vs.g.leader
	if active == nil {
		return nil, http.StatusInternalServerError, "local node not active but active cluster node not found"
	}
	if vaultToken(r) == "" {
		return nil, http.StatusForbidden, "permission denied"
	}
	return active, 0, ""
}

func vaultToken(r *http.Request) string {
	if t := r.Header.Get("X-Vault-Token"); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	return ""
}

// vaultStepDown: the active node gives up the lock and does not take it again for
// VaultStepDownTime; a standby takes it after ElectionTime.
func (s *Sim) vaultStepDown(w http.ResponseWriter, r *http.Request, h *Host) {
	s.mu.Lock()
	active, code, msg := s.vaultActiveLocked(r, h)
	if active == nil {
		s.mu.Unlock()
		writeVaultError(w, code, msg)
		return
	}
	g := &s.vault.g
	active.holdUntil = time.Now().Add(s.cfg.VaultStepDownTime)
	g.clearLeaderLocked(s, "step-down")
	g.scheduleReconcileLocked(s)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) vaultAutopilotState(w http.ResponseWriter, r *http.Request, h *Host) {
	s.mu.Lock()
	active, code, msg := s.vaultActiveLocked(r, h)
	if active == nil {
		s.mu.Unlock()
		writeVaultError(w, code, msg)
		return
	}
	g := &s.vault.g
	reqID := s.uuidLocked()
	views, healthy, ft, voters := g.viewLocked()
	leader := active.id
	if !g.ap.ready { // a new active node's empty autopilot state (autopilot.go)
		views, healthy, ft, voters, leader = nil, false, 0, []string{}, ""
	}
	nonVoters := []string{}
	servers := map[string]any{}
	for _, v := range views {
		status := "voter"
		switch {
		case v.leader:
			status = "leader"
		case !v.m.voter:
			status = "non-voter"
			nonVoters = append(nonVoters, v.m.id)
		}
		servers[v.m.id] = map[string]any{
			"id": v.m.id, "name": v.m.name, "address": v.m.addr, "node_status": "alive",
			"last_contact": v.lastContact.String(), "last_term": v.lastTerm, "last_index": v.lastIndex,
			"healthy": v.m.healthy, "stable_since": v.stableSince.UTC().Format(time.RFC3339Nano),
			"status": status, "version": simVaultVersion, "node_type": "voter",
			"meta": map[string]string{},
		}
	}
	data := map[string]any{
		"healthy": healthy, "failure_tolerance": ft, "leader": leader,
		"voters": voters, "non_voters": nonVoters, "servers": servers,
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"request_id": reqID, "lease_id": "", "renewable": false, "lease_duration": 0,
		"data": data, "wrap_info": nil, "warnings": nil, "auth": nil, "mount_type": "system",
	})
}

package nomadsim

// The server clusters on the server hosts: Nomad's (operator.go serves its API),
// and with Config.ConsulServers and Config.VaultServers a Consul and a Vault server
// on every Nomad server host (consulsim, vaultsim). The three share one Raft
// membership model, raftsim. This file wires them to the emulator: simEnv gives
// them its lock, clock, event log and random source; the Sim methods below are the
// Consul and Vault facade the rest of the repository uses.

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/consulsim"
	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
	"github.com/rollboot/rollboot/internal/nomadsim/vaultsim"
)

// Event types of the Consul and Vault clusters.
const (
	EventConsulLeader      = consulsim.EventLeader      // a Consul leader was elected or lost
	EventConsulHealth      = consulsim.EventHealth      // a Consul server stalled, recovered or caught up
	EventConsulMaintenance = consulsim.EventMaintenance // node maintenance enabled or disabled
	EventVaultActive       = vaultsim.EventActive       // a node became active, or the active node was lost
	EventVaultSealed       = vaultsim.EventSealed       // a node is sealed (boot without auto-unseal, SealVault)
	EventVaultUnsealed     = vaultsim.EventUnsealed     // a node was unsealed (UnsealVault, auto-unseal)
	EventVaultHealth       = vaultsim.EventHealth       // a Vault server stalled, recovered or caught up
)

// EventServerRemoved, EventServerRejoined and EventServerPromoted record
// autopilot's changes to a Raft configuration (raftsim autopilot.go). Details:
// "product" (nomad, consul, vault) and "id".
const (
	EventServerRemoved  = raftsim.EventRemoved
	EventServerRejoined = raftsim.EventRejoined // added back as a non-voter
	EventServerPromoted = raftsim.EventPromoted
)

// simEnv is the emulator as the server clusters see it (raftsim.Env for Nomad's,
// consulsim.Env, vaultsim.Env). Apply and Index are Nomad's Raft index; Consul
// and Vault keep their own.
type simEnv struct{ s *Sim }

func (e simEnv) Lock()                            { e.s.mu.Lock() }
func (e simEnv) Unlock()                          { e.s.mu.Unlock() }
func (e simEnv) Wake()                            { e.s.bumpLocked() }
func (e simEnv) Apply() uint64                    { return e.s.bumpLocked() }
func (e simEnv) Index() uint64                    { return e.s.index }
func (e simEnv) After(d time.Duration, fn func()) { e.s.after(d, fn) }
func (e simEnv) Pick(n int) int                   { return e.s.rng.IntN(n) }
func (e simEnv) UUID() string                     { return e.s.uuidLocked() }
func (e simEnv) Watch() (<-chan struct{}, bool)   { return e.s.notify, e.s.closed }

func (e simEnv) Event(typ, host string, details map[string]string) {
	e.s.eventLocked(Event{Type: typ, Host: host, Details: details})
}

// Node is a host as the Consul catalog sees it, with the service checks of its
// client's allocations (services.go).
func (e simEnv) Node(name string) (consulsim.Node, bool) {
	h, ok := e.s.hosts[name]
	if !ok {
		return consulsim.Node{}, false
	}
	n := consulsim.Node{Up: h.Up, Client: h.NodeID != ""}
	n.Checks, n.ChecksIndex = e.s.serviceChecksLocked(h)
	return n, true
}

// raftConfig are the Raft and autopilot timings every product's cluster shares.
func (c *Config) raftConfig() raftsim.Config {
	return raftsim.Config{
		ElectionTime:       c.ElectionTime,
		CatchUpTime:        c.ServerStabilizeTime,
		UpdateInterval:     c.AutopilotUpdateInterval,
		StabilizationTime:  c.AutopilotStabilizationTime,
		CleanupDeadServers: !c.KeepDeadServers,
	}
}

// initServers makes the three server clusters, without servers yet.
func (s *Sim) initServers() {
	env := simEnv{s}
	s.servers.init(s, env)
	s.consul = consulsim.New(env, consulsim.Config{Datacenter: s.cfg.Datacenter, Raft: s.cfg.raftConfig()})
	s.vault = vaultsim.New(env, vaultsim.Config{AutoUnseal: s.cfg.VaultAutoUnseal,
		StepDownTime: s.cfg.VaultStepDownTime, Raft: s.cfg.raftConfig()})
}

// raftClusters are the Raft clusters of the three products.
func (s *Sim) raftClusters() []*raftsim.Cluster {
	return []*raftsim.Cluster{s.servers.Cluster, s.consul.Raft(), s.vault.Raft()}
}

// startServers runs the autopilot reconcile passes of the three products.
func (s *Sim) startServers() {
	s.every(s.cfg.AutopilotInterval, func(now time.Time) {
		for _, c := range s.raftClusters() {
			c.AutopilotPass(now)
		}
	})
}

// electLocked elects a leader in every cluster that has none and can.
func (s *Sim) electLocked() {
	for _, c := range s.raftClusters() {
		c.Elect()
	}
}

// addServersLocked starts the servers of h, the n-th host: Nomad's, and Consul's
// and Vault's with their own listeners when configured.
func (s *Sim) addServersLocked(h *Host, n int) error {
	s.servers.addLocked(h)
	if s.cfg.ConsulServers {
		lis, err := s.listenAux(h, nil, s.consul.Serve)
		if err != nil {
			return err
		}
		s.auxLis = append(s.auxLis, lis)
		h.ConsulAddr = lis.addr
		s.consul.AddServer(h.Name, h.Dir, n, h.Up)
		if s.consulAddr == "" {
			if s.consulAddr, err = s.listenCluster(s.consul.Route, s.consul.Serve); err != nil {
				return err
			}
		}
	}
	if s.cfg.VaultServers {
		lis, err := s.listenAux(h, nil, s.vault.Serve)
		if err != nil {
			return err
		}
		s.auxLis = append(s.auxLis, lis)
		h.VaultAddr = lis.addr
		s.vault.AddServer(h.Name, n, h.Up)
		if s.vaultAddr == "" {
			if s.vaultAddr, err = s.listenCluster(s.vault.Route, s.vault.Serve); err != nil {
				return err
			}
		}
	}
	return nil
}

// serversDownLocked: the servers of h go down with it.
func (s *Sim) serversDownLocked(h *Host) {
	if m := s.servers.Find(h.Name); m != nil {
		s.servers.HostDown(m)
	}
	s.consul.HostDown(h.Name)
	s.vault.HostDown(h.Name)
}

// serversUpLocked: the servers of h start with it.
func (s *Sim) serversUpLocked(h *Host) {
	if m := s.servers.Find(h.Name); m != nil {
		s.servers.HostUp(m, false)
	}
	s.consul.HostUp(h.Name)
	s.vault.HostUp(h.Name)
}

// listenCluster starts the cluster address of Consul or Vault, which forwards to
// the host route names (the leader's); it returns the address.
func (s *Sim) listenCluster(route func() string, serve func(http.ResponseWriter, *http.Request, string)) (string, error) {
	lis, err := s.listenAux(nil, route, serve)
	if err != nil {
		return "", err
	}
	s.auxLis = append(s.auxLis, lis)
	return lis.addr, nil
}

// listenAux starts a per-host (h != nil) or cluster (h == nil) listener for a
// Consul or Vault handler. Every request waits the request latency first
// (Config.RequestLatency). A per-host listener drops every connection while its
// host is down; the cluster listener drops it when route finds no host that is up.
func (s *Sim) listenAux(h *Host, route func() string, serve func(http.ResponseWriter, *http.Request, string)) (*listener, error) {
	return s.listenHandler("127.0.0.1:0", h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.awaitLatency(r); !ok {
			return
		}
		s.mu.Lock()
		target := h
		if target == nil {
			target = s.hosts[route()]
		}
		up := target != nil && target.Up
		s.mu.Unlock()
		if !up {
			dropConnection(w)
			return
		}
		serve(w, r, target.Name)
	}))
}

// ---- the Consul and Vault facade ------------------------------------------------------

// hostLocked checks that host exists.
func (s *Sim) hostLocked(host string) error {
	if _, ok := s.hosts[host]; !ok {
		return fmt.Errorf("host %q not found", host)
	}
	return nil
}

// SetConsulServerHealthy makes the Consul server on host a stalled follower (false)
// or a following one again (true), like SetServerHealthy for Nomad.
func (s *Sim) SetConsulServerHealthy(host string, healthy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hostLocked(host); err != nil {
		return err
	}
	return s.consul.SetHealthy(host, healthy)
}

// ConsulAddress is the URL of the Consul cluster address (as CONSUL_HTTP_ADDR): it
// forwards to the leader's agent. "" when the cluster runs no Consul.
func (s *Sim) ConsulAddress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consulAddr == "" {
		return ""
	}
	return "http://" + s.consulAddr
}

// ConsulLeader returns the host of the Consul leader ("" when there is none).
func (s *Sim) ConsulLeader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consul.Leader()
}

// SealVault seals the Vault node on host (like "vault operator seal" on it): it
// leaves Raft; an active node loses the lock and the standbys elect a new one.
func (s *Sim) SealVault(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hostLocked(host); err != nil {
		return err
	}
	return s.vault.Seal(host)
}

// UnsealVault unseals the Vault node on host (the operator entered the key shares).
// It rejoins Raft and is unhealthy until it caught up (ServerStabilizeTime).
func (s *Sim) UnsealVault(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hostLocked(host); err != nil {
		return err
	}
	return s.vault.Unseal(host)
}

// SetVaultServerHealthy makes the Vault server on host a stalled node (false): it
// stays unsealed but stops applying the Raft log and cannot heartbeat the active
// node; a stalled active node loses the lock after ElectionTime. true undoes it.
func (s *Sim) SetVaultServerHealthy(host string, healthy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hostLocked(host); err != nil {
		return err
	}
	return s.vault.SetHealthy(host, healthy)
}

// VaultAddress is the URL of the Vault cluster address (as VAULT_ADDR): it forwards
// to the active node. "" when the cluster runs no Vault.
func (s *Sim) VaultAddress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vaultAddr == "" {
		return ""
	}
	return "http://" + s.vaultAddr
}

// VaultActive returns the host of the active Vault node ("" when there is none).
func (s *Sim) VaultActive() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vault.Active()
}

// VaultSealed reports whether the Vault node on host is sealed.
func (s *Sim) VaultSealed(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vault.Sealed(host)
}

// Package vaultsim emulates the Vault servers with integrated storage (Raft) that
// run beside the Nomad servers of an emulated cluster (nomadsim
// Config.VaultServers). The active node is the Raft leader (physical/raft RaftLock
// is held by the leader); the Raft/autopilot model is raftsim's.
// internal/nomadsim owns the hosts, the listeners and the state lock; it serves
// each request through Cluster.Serve.
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
//     again for manualStepDownSleepPeriod (vault/ha.go, 10s; Config.StepDownTime).
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
// Seal. Vault starts sealed after a reboot unless Config.AutoUnseal (an auto
// unseal "seal" stanza) is set (vault/core.go: the barrier keys are not kept across
// restarts). A sealed node does not run Raft: for Raft it is like a host that is
// down, but Vault's autopilot keeps its node_status "alive" until the dead-server
// threshold (physical/raft/raft_autopilot.go KnownServers, 24h by default).
//
// Autopilot. Vault's autopilot resets its state when the active node changes and
// promotes stable non-voters like Consul's (raftsim autopilot.go), but it never
// removes dead servers by default: its delegate passes CleanupDeadServers=false to
// raft-autopilot (physical/raft/raft_autopilot.go AutopilotConfig), and its own
// cleanup (autopilot_cleanup_dead_servers) is off by default. So a rebooted Vault
// node stays a voter. That option is not modelled (with it, Vault 1.19+ also
// marks a removed node removed_from_cluster, which needs an operator).
//
// Locking. Every method but Serve runs with the emulator's state lock held; Serve
// takes it (Env is a sync.Locker).
package vaultsim

import (
	"fmt"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
)

// Event types of the Vault cluster.
const (
	EventActive   = "vault.active"   // a node became active, or the active node was lost
	EventSealed   = "vault.sealed"   // a node is sealed (boot without auto-unseal, Seal)
	EventUnsealed = "vault.unsealed" // a node was unsealed (Unseal, auto-unseal)
	EventHealth   = "vault.health"   // a Vault server stalled, recovered or caught up
)

// Version is the Vault version the emulator claims to be.
const Version = "1.20.0"

// Env is what the Vault servers need from the emulator. Its methods run with the
// state lock held.
type Env interface {
	raftsim.Emulator
	sync.Locker // the emulator's state lock
	// UUID is a new random ID from the emulator's seeded source.
	UUID() string
}

// Config describes the Vault servers.
type Config struct {
	// AutoUnseal makes a node unseal itself at boot (an auto-unseal seal stanza).
	AutoUnseal bool
	// StepDownTime is how long a node that stepped down waits before it tries
	// to take the HA lock again (vault/ha.go manualStepDownSleepPeriod, 10s).
	StepDownTime time.Duration
	// Raft has the timings; New names the product and its events, and turns the
	// dead-server cleanup off (package comment).
	Raft raftsim.Config
}

// Cluster is the Vault servers of the emulated cluster, one per server host. The
// Vault node ID is the host name.
type Cluster struct {
	env  Env
	cfg  Config
	raft *raftsim.Cluster

	index     uint64           // the servers' Raft index
	clusterID string           // made with the first server
	nodes     map[string]*node // by host name
}

type node struct {
	m       *raftsim.Member
	apiAddr string // api_addr
	sealed  bool
	uninit  bool // not initialized
}

// New returns a cluster without servers.
func New(env Env, cfg Config) *Cluster {
	c := &Cluster{env: env, cfg: cfg, nodes: map[string]*node{}}
	rc := cfg.Raft
	rc.Product, rc.LeaderEvent, rc.HealthEvent = "vault", EventActive, EventHealth
	rc.CleanupDeadServers = false
	c.raft = raftsim.New(raftsim.OwnIndex{Emulator: env, N: &c.index}, rc)
	return c
}

// Raft is the servers' Raft cluster.
func (c *Cluster) Raft() *raftsim.Cluster { return c.raft }

// AddServer starts an initialized, unsealed Vault server on host (the n-th
// host, which gives it its address); up tells whether the host is up.
func (c *Cluster) AddServer(host string, n int, up bool) {
	if c.clusterID == "" {
		c.clusterID = c.env.UUID()
	}
	ip := fmt.Sprintf("10.0.%d.%d", n/250, n%250+1)
	m := &raftsim.Member{ID: host, Name: host, Host: host, Addr: ip + ":8201"}
	c.nodes[host] = &node{m: m, apiAddr: "https://" + ip + ":8200"}
	c.raft.Add(m, up)
}

// Route is the host the cluster address forwards to, like active.vault.service
// (raftsim Route).
func (c *Cluster) Route() string { return c.raft.Route() }

// HostDown: the host of a Vault node went down.
func (c *Cluster) HostDown(host string) {
	if n := c.nodes[host]; n != nil {
		c.raft.HostDown(n.m)
	}
}

// HostUp: the host of a Vault node is back. Vault starts sealed, unless
// auto-unseal unseals it at start.
func (c *Cluster) HostUp(host string) {
	n := c.nodes[host]
	if n == nil {
		return
	}
	switch {
	case n.uninit:
		c.raft.HostUp(n.m, true)
	case !c.cfg.AutoUnseal:
		n.sealed = true
		c.raft.HostUp(n.m, true)
		c.env.Event(EventSealed, host, map[string]string{"reason": "boot"})
	default:
		n.sealed = false
		c.env.Event(EventUnsealed, host, map[string]string{"reason": "auto-unseal"})
		c.raft.HostUp(n.m, false)
	}
}

func (c *Cluster) node(host string) (*node, error) {
	n := c.nodes[host]
	if n == nil {
		return nil, fmt.Errorf("host %q runs no Vault server", host)
	}
	return n, nil
}

// upNode is the Vault node on host, which must be up.
func (c *Cluster) upNode(host string) (*node, error) {
	n, err := c.node(host)
	if err != nil {
		return nil, err
	}
	if !n.m.Up() {
		return nil, fmt.Errorf("host %q is down", host)
	}
	return n, nil
}

// Seal seals the Vault node on host (like "vault operator seal" on it): it leaves
// Raft; an active node loses the lock and the standbys elect a new one.
func (c *Cluster) Seal(host string) error {
	n, err := c.upNode(host)
	if err != nil || n.sealed {
		return err
	}
	n.sealed = true
	c.raft.Detach(n.m)
	c.env.Event(EventSealed, host, map[string]string{"reason": "injected"})
	return nil
}

// Unseal unseals the Vault node on host (the operator entered the key shares). It
// rejoins Raft and is unhealthy until it caught up.
func (c *Cluster) Unseal(host string) error {
	n, err := c.upNode(host)
	if err != nil {
		return err
	}
	if n.uninit {
		return fmt.Errorf("vault on host %q is not initialized", host)
	}
	if !n.sealed {
		return nil
	}
	n.sealed = false
	c.env.Event(EventUnsealed, host, map[string]string{"reason": "unseal"})
	c.raft.Attach(n.m)
	return nil
}

// Uninitialize makes the sealed node on host one that is not initialized, as a
// node whose storage was wiped. No API of the emulator does it: Vault's 501 is
// for tests.
func (c *Cluster) Uninitialize(host string) error {
	n, err := c.node(host)
	if err != nil {
		return err
	}
	if !n.sealed {
		return fmt.Errorf("vault on host %q is not sealed", host)
	}
	n.uninit = true
	return nil
}

// SetHealthy makes the Vault server on host a stalled node (false): it stays
// unsealed but stops applying the Raft log and cannot heartbeat the active node;
// a stalled active node loses the lock after ElectionTime. true undoes it.
func (c *Cluster) SetHealthy(host string, healthy bool) error {
	n, err := c.node(host)
	if err != nil {
		return err
	}
	c.raft.SetStalled(n.m, !healthy)
	return nil
}

// Active is the host of the active node ("" when there is none).
func (c *Cluster) Active() string {
	if l := c.raft.Leader(); l != nil {
		return l.Host
	}
	return ""
}

// Sealed reports whether the Vault node on host is sealed.
func (c *Cluster) Sealed(host string) bool {
	n := c.nodes[host]
	return n != nil && n.sealed
}

// Package consulsim emulates the Consul servers that run beside the Nomad servers
// of an emulated cluster (nomadsim Config.ConsulServers): their Raft cluster and
// autopilot (raftsim), each server's local agent, node maintenance and the node
// health checks of the catalog. internal/nomadsim owns the hosts, the listeners
// and the state lock; it serves each request through Cluster.Serve.
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
//     with the service checks of the node's allocations (nomadsim services.go).
//
// ACLs are not enforced: X-Consul-Token and "Authorization: Bearer" are accepted and
// ignored, as on an agent with acl.enabled = false.
//
// Locking. Every method but Serve runs with the emulator's state lock held; Serve
// takes it (Env is a sync.Locker).
package consulsim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
)

// Event types of the Consul cluster.
const (
	EventLeader      = "consul.leader"      // a Consul leader was elected or lost
	EventHealth      = "consul.health"      // a Consul server stalled, recovered or caught up
	EventMaintenance = "consul.maintenance" // node maintenance enabled or disabled
)

// Version is the Consul version the emulator claims to be.
const Version = "1.21.4"

// Env is what the Consul servers need from the emulator. Its methods run with
// the state lock held.
type Env interface {
	raftsim.Emulator
	sync.Locker // the emulator's state lock
	// UUID is a new random ID from the emulator's seeded source.
	UUID() string
	// Node is what the catalog knows of the host named name.
	Node(name string) (Node, bool)
	// Watch returns a channel closed at the emulator's next change, and whether
	// the emulator is closed.
	Watch() (<-chan struct{}, bool)
}

// Node is what the Consul catalog sees of a host: a Consul node whether it runs a
// Consul server or a Nomad client (whose local Consul agent holds the checks of
// the client's allocations).
type Node struct {
	Up     bool
	Client bool // runs a Nomad client
	// Checks are the service checks of the client's running allocations, and
	// ChecksIndex a number that moves whenever one of them may have changed.
	Checks      consulapi.HealthChecks
	ChecksIndex uint64
}

// Config describes the Consul servers.
type Config struct {
	Datacenter string
	// Raft has the timings and CleanupDeadServers; New names the product and
	// its events.
	Raft raftsim.Config
}

// Cluster is the Consul servers of the emulated cluster, one per server host.
type Cluster struct {
	env  Env
	cfg  Config
	raft *raftsim.Cluster

	index        uint64            // the servers' Raft index (X-Consul-Index, last_index)
	catalogIndex uint64            // modify index of the health checks (X-Consul-Index)
	agents       map[string]*agent // by host name
}

// agent is the Consul agent of a server host.
type agent struct {
	nodeID string
	dir    string  // the host's folder: the persisted checks live under it
	maint  *maint  // the registered maintenance check, or nil
	checks checkIx // indexes of its serfHealth check
}

type checkIx struct{ create, modify uint64 }

// maint is the persisted maintenance check (agent/agent.go persistCheck writes
// <data_dir>/checks/<hash>; here <host dir>/consul/checks/_node_maintenance).
type maint struct {
	Reason string `json:"reason"`
}

// nodeMaintCheckID is structs.NodeMaint.
const nodeMaintCheckID = "_node_maintenance"

// defaultNodeMaintReason is agent.go defaultNodeMaintReason.
const defaultNodeMaintReason = "Maintenance mode is enabled for this node, but no reason was provided. This is a default message."

// New returns a cluster without servers.
func New(env Env, cfg Config) *Cluster {
	c := &Cluster{env: env, cfg: cfg, catalogIndex: 1, agents: map[string]*agent{}}
	rc := cfg.Raft
	rc.Product, rc.LeaderEvent, rc.HealthEvent = "consul", EventLeader, EventHealth
	c.raft = raftsim.New(raftsim.OwnIndex{Emulator: env, N: &c.index}, rc)
	return c
}

// Raft is the servers' Raft cluster.
func (c *Cluster) Raft() *raftsim.Cluster { return c.raft }

// AddServer starts a Consul server on host (the n-th host, which gives it its
// address); dir is the host's folder; up tells whether the host is up.
func (c *Cluster) AddServer(host, dir string, n int, up bool) {
	a := &agent{nodeID: c.env.UUID(), dir: dir}
	c.agents[host] = a
	c.raft.Add(&raftsim.Member{ID: a.nodeID, Name: host, Host: host,
		Addr: fmt.Sprintf("10.0.%d.%d:8300", n/250, n%250+1)}, up)
	c.catalogIndex = c.index
	a.checks = checkIx{create: c.index, modify: c.index}
	c.loadMaint(host)
}

// NodeID is the node ID of the Consul server on host ("" when it runs none).
func (c *Cluster) NodeID(host string) string {
	if a := c.agents[host]; a != nil {
		return a.nodeID
	}
	return ""
}

// Route is the host the cluster address forwards to: the leader's (raftsim Route).
func (c *Cluster) Route() string { return c.raft.Route() }

// Leader is the host of the leader ("" when there is none).
func (c *Cluster) Leader() string {
	if l := c.raft.Leader(); l != nil {
		return l.Host
	}
	return ""
}

func (a *agent) maintFile() string {
	return filepath.Join(a.dir, "consul", "checks", nodeMaintCheckID)
}

// loadMaint reloads the persisted maintenance check at agent start (agent.go
// loadChecks reads the persisted checks).
func (c *Cluster) loadMaint(host string) {
	a := c.agents[host]
	a.maint = nil
	b, err := os.ReadFile(a.maintFile())
	if err != nil {
		return
	}
	var m maint
	if json.Unmarshal(b, &m) != nil {
		return
	}
	a.maint = &m
}

// HostDown: the host of a Consul server went down.
func (c *Cluster) HostDown(host string) {
	m := c.raft.Find(host)
	if m == nil {
		return
	}
	c.raft.HostDown(m)
	c.serfChanged(host)
}

// HostUp: the host of a Consul server is back; its agent reloads its checks and
// its server joins again.
func (c *Cluster) HostUp(host string) {
	m := c.raft.Find(host)
	if m == nil {
		return
	}
	c.loadMaint(host)
	c.serfChanged(host)
	c.raft.HostUp(m, false)
}

// serfChanged: the serfHealth check of host changed (the leader's reconcile
// updates the catalog when a member fails or joins; leader.go handleFailedMember).
func (c *Cluster) serfChanged(host string) {
	c.index++
	c.catalogIndex = c.index
	if a := c.agents[host]; a != nil {
		a.checks.modify = c.index
	}
}

// ChecksChanged records a change of the checks in the catalog (a service check
// of a Nomad allocation): Consul's index moves, not Nomad's.
func (c *Cluster) ChecksChanged() {
	c.index++
	c.catalogIndex = c.index
	c.env.Wake()
}

// SetHealthy makes the Consul server on host a stalled follower (false) or a
// following one again (true), like Nomad's SetServerHealthy.
func (c *Cluster) SetHealthy(host string, healthy bool) error {
	m := c.raft.ByHost(host)
	if m == nil {
		return fmt.Errorf("host %q runs no Consul server", host)
	}
	c.raft.SetStalled(m, !healthy)
	return nil
}

// agentChecks are the checks registered with the local agent of host.
func (c *Cluster) agentChecks(host string) map[string]*consulapi.AgentCheck {
	out := map[string]*consulapi.AgentCheck{}
	if a := c.agents[host]; a != nil && a.maint != nil {
		out[nodeMaintCheckID] = &consulapi.AgentCheck{
			Node: host, CheckID: nodeMaintCheckID, Name: "Node Maintenance Mode",
			Status: consulapi.HealthCritical, Notes: a.maint.Reason, Type: "maintenance",
		}
	}
	return out
}

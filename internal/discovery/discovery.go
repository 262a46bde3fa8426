// Package discovery finds which Nomad, Consul and Vault servers run on this host,
// by asking the host's local agents. It fails closed: any failure but a refused
// connection (nothing listens) is an error, never "no server here", since a
// server that goes unseen would skip its quorum gate.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// Local holds clients of the agents on THIS host. A nil client means the product
// is not looked for.
type Local struct {
	Nomad  *nomadapi.Client
	Consul *consulapi.Client
	Vault  *vaultapi.Client
	// Host is the host's name in rollboot. Its Nomad node is the node of this
	// name (HostNode), as the coordinator has it, not a node its local agent
	// names: a host speaks only for itself.
	Host string
	// VaultNodeID is the Vault Raft node_id when the operator knows it
	// (VAULT_RAFT_NODE_ID, as Vault itself reads it). Without it Discover uses the
	// autopilot leader when the local node is active, else a server whose ID or
	// name equals Hostname.
	VaultNodeID string
	Hostname    string
	// ConsulAddr is the address the Consul client talks to ("" = assume local).
	// A Consul or Vault address that is not on this machine (a cluster address
	// such as vault.service.consul) answers for some other node: Discover then
	// finds no server of that product here rather than mistaking that node's
	// role for this host's. Vault's address is read from its client.
	ConsulAddr string
	// Resolver looks up the names in those addresses (net.DefaultResolver when
	// nil). A failed lookup is an error of Discover, never "not on this machine".
	Resolver Resolver
}

// Resolver looks up a host name's addresses; *net.Resolver implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

func (l Local) resolver() Resolver {
	if l.Resolver == nil {
		return net.DefaultResolver
	}
	return l.Resolver
}

// LocalFromEnv builds the local clients from each product's DefaultConfig, which
// reads the usual variables: NOMAD_ADDR, NOMAD_TOKEN, NOMAD_REGION, NOMAD_CACERT,
// NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY...; CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN,
// CONSUL_CACERT, CONSUL_CLIENT_CERT, CONSUL_CLIENT_KEY, CONSUL_HTTP_SSL...;
// VAULT_ADDR, VAULT_TOKEN, VAULT_CACERT, VAULT_CLIENT_CERT, VAULT_CLIENT_KEY...
// Unset addresses are the local defaults (127.0.0.1:4646, :8500, :8200). Errors
// name the product, never a token.
func LocalFromEnv() (Local, error) {
	var l Local
	var err error
	// Every request has a deadline (package deadline).
	if l.Nomad, err = deadline.NomadClient(nomadapi.DefaultConfig()); err != nil {
		return Local{}, fmt.Errorf("nomad client: %w", err)
	}
	cc := consulapi.DefaultConfig()
	if l.Consul, err = deadline.ConsulClient(cc); err != nil {
		return Local{}, fmt.Errorf("consul client: %w", err)
	}
	l.ConsulAddr = cc.Address
	vc := vaultapi.DefaultConfig()
	if vc.Error != nil {
		return Local{}, fmt.Errorf("vault client: %w", vc.Error)
	}
	if l.Vault, err = vaultapi.NewClient(deadline.VaultConfig(vc)); err != nil {
		return Local{}, fmt.Errorf("vault client: %w", err)
	}
	l.VaultNodeID = os.Getenv("VAULT_RAFT_NODE_ID")
	l.Hostname, _ = os.Hostname()
	return l, nil
}

// ServerRole is one server that runs on this host.
type ServerRole struct {
	Product health.Product
	// Cluster is the Nomad region, the Consul datacenter or the Vault cluster name
	// ("" for a sealed Vault node: Vault only tells it when unsealed).
	Cluster string
	// ID is the server's Raft ID, as the product's autopilot reports it. "" when
	// it could not be found; Detail says why.
	ID     string
	Name   string
	Detail string
}

// Roles are the servers on this host; nil means the host runs no such server.
type Roles struct {
	Nomad  *ServerRole
	Consul *ServerRole
	Vault  *ServerRole
	// NomadNodeID is the ID of the host's node (HostNode) when its local Nomad
	// agent runs a client, "" when it runs none.
	NomadNodeID string
}

// Names are the roles as the host record stores them (store.Role*).
func (r Roles) Names() []string {
	var out []string
	if r.NomadNodeID != "" {
		out = append(out, store.RoleNomadClient)
	}
	if r.Nomad != nil {
		out = append(out, store.RoleNomadServer)
	}
	if r.Consul != nil {
		out = append(out, store.RoleConsulServer)
	}
	if r.Vault != nil {
		out = append(out, store.RoleVaultServer)
	}
	return out
}

// Discover finds which servers run on this host by asking its local agents. A
// product whose local agent refuses the connection (nothing listens) is not a
// server here. Every other failure — a dropped connection (the agent is
// restarting), a timeout, TLS, HTTP 403 or 5xx, a failed lookup of the agent's
// address — is returned as an error, since "not a server" would open the quorum
// gates wrongly.
func Discover(ctx context.Context, l Local) (Roles, error) {
	return DiscoverKnowing(ctx, l, nil)
}

// NomadSelf is what a host's local Nomad agent runs and, with a client, the
// host's node (HostNode): the first two questions of discoverNomad, when the
// caller asked them itself (agent.Identity, at the agent's start).
type NomadSelf struct {
	Client, Server bool
	NodeID         string
}

// DiscoverKnowing is Discover, with what the local Nomad agent runs already
// known (self; nil: asked here). It saves the agent two requests per start
// (GET /v1/agent/health and the node list by name) that it has just made.
func DiscoverKnowing(ctx context.Context, l Local, self *NomadSelf) (Roles, error) {
	var r Roles
	var err error
	switch {
	case l.Nomad != nil && self != nil:
		if r.Nomad, r.NomadNodeID, err = knownNomad(ctx, l.Nomad, *self); err != nil {
			return Roles{}, err
		}
	case l.Nomad != nil:
		if r.Nomad, r.NomadNodeID, err = discoverNomad(ctx, l.Nomad, l.Host); err != nil {
			return Roles{}, err
		}
	}
	if l.Consul != nil {
		local := true
		if l.ConsulAddr != "" {
			if local, err = IsLocalAddress(ctx, l.resolver(), l.ConsulAddr); err != nil {
				return Roles{}, fmt.Errorf("discover consul: is %s this host: %w", l.ConsulAddr, err)
			}
		}
		if local {
			if r.Consul, err = discoverConsul(ctx, l.Consul); err != nil {
				return Roles{}, err
			}
		}
	}
	if l.Vault != nil {
		local, err := IsLocalAddress(ctx, l.resolver(), l.Vault.Address())
		if err != nil {
			return Roles{}, fmt.Errorf("discover vault: is %s this host: %w", l.Vault.Address(), err)
		}
		if local {
			if r.Vault, err = discoverVault(ctx, l); err != nil {
				return Roles{}, err
			}
		}
	}
	return r, nil
}

// discoverNomad asks the local Nomad agent what it runs (GET /v1/agent/health,
// which Nomad answers with no ACL check), the cluster which node is the host's
// (HostNode: GET /v1/nodes, node:read), and, on a server, its own Serf member
// (GET /v1/agent/members, node:read). No call needs agent:read. A refused
// connection is no Nomad agent here; a client whose node cannot be found, or a
// server not among its own members, is an error (it cannot tell).
func discoverNomad(ctx context.Context, c *nomadapi.Client, host string) (*ServerRole, string, error) {
	h, err := localNomadHealth(ctx, c)
	switch {
	case err != nil && isRefused(err):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("discover nomad: agent health: %w", err)
	}
	var nodeID string
	if h.Client != nil {
		if host == "" {
			return nil, "", errors.New("discover nomad: the local agent runs a client, but no host name was given to find its node")
		}
		if nodeID, err = HostNode(ctx, c.Nodes(), host); err != nil {
			return nil, "", fmt.Errorf("discover nomad: %w", err)
		}
		if nodeID == "" {
			return nil, "", fmt.Errorf("discover nomad: the local agent runs a client, but no Nomad node is named %q", host)
		}
	}
	if h.Server == nil {
		return nil, nodeID, nil
	}
	role, err := localNomadServer(ctx, c)
	if err != nil {
		return nil, "", fmt.Errorf("discover nomad: %w", err)
	}
	return role, nodeID, nil
}

// knownNomad is discoverNomad for a local agent whose health and node the
// caller already read (self): only a server's own Serf member is left to ask.
func knownNomad(ctx context.Context, c *nomadapi.Client, self NomadSelf) (*ServerRole, string, error) {
	if self.Client && self.NodeID == "" {
		return nil, "", errors.New("discover nomad: the local agent runs a client, but its node is not known")
	}
	if !self.Server {
		return nil, self.NodeID, nil
	}
	role, err := localNomadServer(ctx, c)
	if err != nil {
		return nil, "", fmt.Errorf("discover nomad: %w", err)
	}
	return role, self.NodeID, nil
}

// localNomadHealth reads GET /v1/agent/health (command/agent/agent_endpoint.go
// HealthRequest): a "client" key when the agent runs a client, a "server" key
// when it runs a server, each with ok and a message. An unhealthy agent (a
// client that knows no server, a server without a leader) answers 500 with the
// same JSON as its body; it is read all the same, since what the agent runs is
// all that is asked. Raw, not Agent().Health(), so that the request follows ctx.
func localNomadHealth(ctx context.Context, c *nomadapi.Client) (*nomadapi.AgentHealthResponse, error) {
	var h nomadapi.AgentHealthResponse
	_, err := c.Raw().Query("/v1/agent/health", &h, (&nomadapi.QueryOptions{}).WithContext(ctx))
	var ure nomadapi.UnexpectedResponseError
	if errors.As(err, &ure) && ure.StatusCode() == http.StatusInternalServerError {
		h = nomadapi.AgentHealthResponse{}
		if json.Unmarshal([]byte(ure.Body()), &h) != nil {
			return nil, err
		}
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if h.Client == nil && h.Server == nil {
		return nil, errors.New("the answer names neither a client nor a server")
	}
	return &h, nil
}

// localNomadServer finds the local server's Serf member in GET /v1/agent/members
// (command/agent/agent_endpoint.go AgentMembersRequest → nomad/status_endpoint.go
// Status.Members, node:read): the local server answers it from its own Serf,
// naming itself (ServerName, ServerRegion); its member is "<name>.<region>"
// (nomad/server.go setupSerf), whose tags "id" and "region" are its Raft ID and
// its cluster. Only a server's own agent answers for itself: a client agent
// forwards the call to some server.
func localNomadServer(ctx context.Context, c *nomadapi.Client) (*ServerRole, error) {
	var m nomadapi.ServerMembers
	if _, err := c.Raw().Query("/v1/agent/members", &m, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("agent members: %w", err)
	}
	name := m.ServerName + "." + m.ServerRegion
	for _, mem := range m.Members {
		if mem == nil || mem.Name != name {
			continue
		}
		role := &ServerRole{Product: health.Nomad, ID: mem.Tags["id"], Name: mem.Name, Cluster: mem.Tags["region"]}
		if role.Cluster == "" {
			role.Cluster = m.ServerRegion
		}
		if role.ID == "" {
			role.Detail = "the agent's Serf member has no id tag"
		}
		return role, nil
	}
	return nil, fmt.Errorf("agent members: the local server %q is not among its own Serf members", name)
}

// NodeLister lists Nomad nodes (GET /v1/nodes); *nomadapi.Nodes implements it.
type NodeLister interface {
	List(q *nomadapi.QueryOptions) ([]*nomadapi.NodeListStub, *nomadapi.QueryMeta, error)
}

// HostNode is the ID of host's Nomad node: the node whose name is host's, as
// the coordinator matches them (GET /v1/nodes?filter=Name == "<host>",
// node:read); "" when no node has that name. Of several nodes of the name (a
// host installed anew, with a new node ID, leaves its old node behind, down),
// the one not down, then the newest (highest CreateIndex). The list is read
// stale, from whichever server answers, as /v1/agent/self was answered by the
// local agent: a host learns who it is while the cluster has no leader.
func HostNode(ctx context.Context, nodes NodeLister, host string) (string, error) {
	n, err := HostNodeStub(ctx, nodes, host)
	if n == nil {
		return "", err
	}
	return n.ID, nil
}

// HostNodeStub is HostNode's node as the list shows it (its client's Nomad
// version among the rest); nil when no node has the host's name.
func HostNodeStub(ctx context.Context, nodes NodeLister, host string) (*nomadapi.NodeListStub, error) {
	q := (&nomadapi.QueryOptions{Filter: "Name == " + strconv.Quote(host), AllowStale: true}).WithContext(ctx)
	stubs, _, err := nodes.List(q)
	if err != nil {
		return nil, fmt.Errorf("nodes named %q: %w", host, err)
	}
	return pickHostNode(stubs, host), nil
}

// pickHostNode is HostNode's choice among stubs (whatever the filter let
// through: the name is checked again).
func pickHostNode(stubs []*nomadapi.NodeListStub, host string) *nomadapi.NodeListStub {
	var best *nomadapi.NodeListStub
	better := func(n *nomadapi.NodeListStub) bool {
		nUp, bestUp := n.Status != nomadapi.NodeStatusDown, best.Status != nomadapi.NodeStatusDown
		if nUp != bestUp {
			return nUp
		}
		return n.CreateIndex > best.CreateIndex
	}
	for _, n := range stubs {
		if n != nil && n.Name == host && (best == nil || better(n)) {
			best = n
		}
	}
	return best
}

// discoverConsul reads /v1/agent/self (Config.Server, NodeID, NodeName,
// Datacenter), then the Raft configuration (?stale, operator:read) to find the
// Raft ID of this node by node name. A server not (yet) in the configuration gets
// its node ID, which is its Raft ID with Raft protocol 3.
func discoverConsul(ctx context.Context, c *consulapi.Client) (*ServerRole, error) {
	var self map[string]map[string]any
	if _, err := c.Raw().Query("/v1/agent/self", &self, (&consulapi.QueryOptions{}).WithContext(ctx)); err != nil {
		if isRefused(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("discover consul: agent self: %w", err)
	}
	cfg := self["Config"]
	if server, _ := cfg["Server"].(bool); !server {
		return nil, nil
	}
	nodeName, _ := cfg["NodeName"].(string)
	nodeID, _ := cfg["NodeID"].(string)
	dc, _ := cfg["Datacenter"].(string)
	role := &ServerRole{Product: health.Consul, Cluster: dc, Name: nodeName}
	rc, err := c.Operator().RaftGetConfiguration((&consulapi.QueryOptions{AllowStale: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("discover consul: raft configuration: %w", err)
	}
	for _, s := range rc.Servers {
		if s.Node == nodeName || (nodeID != "" && s.ID == nodeID) {
			role.ID = s.ID
			return role, nil
		}
	}
	role.ID = nodeID
	role.Detail = "not in the Raft configuration: using the node ID"
	return role, nil
}

// discoverVault asks the local node's own sys/health (unauthenticated; with no
// retries, so that a host without Vault answers at once), then finds the node ID:
// Local.VaultNodeID, else the autopilot leader when this node is active, else the
// autopilot server whose ID or name is Local.Hostname. Autopilot lists Raft
// (cluster) addresses only, so the local API address cannot be matched to it.
func discoverVault(ctx context.Context, l Local) (*ServerRole, error) {
	probe, err := l.Vault.Clone()
	if err != nil {
		return nil, fmt.Errorf("discover vault: %w", err)
	}
	probe.SetMaxRetries(0)
	hr, err := probe.Sys().HealthWithContext(ctx)
	if err != nil {
		if isRefused(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("discover vault: sys/health: %w", err)
	}
	role := &ServerRole{Product: health.Vault, Cluster: hr.ClusterName}
	switch {
	case l.VaultNodeID != "":
		role.ID = l.VaultNodeID
	case !hr.Initialized:
		role.Detail = "vault is not initialized"
	case hr.Sealed:
		role.Detail = "vault is sealed: set VAULT_RAFT_NODE_ID to know its node ID"
	default:
		state, err := l.Vault.Sys().RaftAutopilotStateWithContext(ctx)
		if err != nil || state == nil {
			role.Detail = fmt.Sprintf("cannot read autopilot state: %v", err)
			break
		}
		if !hr.Standby {
			role.ID = state.Leader
			break
		}
		for id, s := range state.Servers {
			if l.Hostname != "" && (id == l.Hostname || s.Name == l.Hostname) {
				role.ID = id
			}
		}
		if role.ID == "" {
			role.Detail = "no autopilot server is named after this host: set VAULT_RAFT_NODE_ID"
		}
	}
	if role.ID != "" {
		role.Name = role.ID
	}
	return role, nil
}

// IsLocalAddress reports whether addr (a URL, or host:port) names this machine: a
// unix socket, localhost, a loopback address, or a name or address that resolves
// (with r, within 2s) to one of this machine's interface addresses. It fails
// closed: a malformed address, a failed or timed-out lookup, or unreadable
// interface addresses is an error, not "elsewhere" — a wrong "elsewhere" would
// hide a server on this host from the quorum gates.
func IsLocalAddress(ctx context.Context, r Resolver, addr string) (bool, error) {
	host := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return false, fmt.Errorf("parse address: %w", err)
		}
		if u.Scheme == "unix" {
			return true, nil
		}
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" || strings.EqualFold(host, "localhost") {
		return true, nil
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupIPAddr(lctx, host)
		if err != nil {
			return false, fmt.Errorf("look up %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return false, fmt.Errorf("look up %s: no addresses", host)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true, nil
		}
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("this host's addresses: %w", err)
	}
	for _, ip := range ips {
		for _, a := range ifaddrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true, nil
			}
		}
	}
	return false, nil
}

// isRefused reports whether err means that nothing listens at the address (the
// connection was refused). A dropped connection, a timeout, a TLS or HTTP error is
// not refused.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

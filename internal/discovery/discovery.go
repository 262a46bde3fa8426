// Package discovery finds which Nomad, Consul and Vault servers run on this host,
// by asking the host's local agents. It fails closed: any failure but a refused
// connection (nothing listens) is an error, never "no server here", since a
// server that goes unseen would skip its quorum gate.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
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
	// NomadNodeID is the node ID of the local Nomad client, "" without one.
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
	var r Roles
	var err error
	if l.Nomad != nil {
		if r.Nomad, r.NomadNodeID, err = discoverNomad(ctx, l.Nomad); err != nil {
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

// discoverNomad reads /v1/agent/self (agent:read): stats.nomad.server, member
// Tags.id (the Raft ID) and Tags.region; stats.client.node_id. It uses Raw because
// Agent().Self() flattens the error and so hides a refused connection.
func discoverNomad(ctx context.Context, c *nomadapi.Client) (*ServerRole, string, error) {
	var self nomadapi.AgentSelf
	if _, err := c.Raw().Query("/v1/agent/self", &self, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
		if isRefused(err) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("discover nomad: agent self: %w", err)
	}
	nodeID := self.Stats["client"]["node_id"]
	if self.Stats["nomad"]["server"] != "true" {
		return nil, nodeID, nil
	}
	role := &ServerRole{Product: health.Nomad, ID: self.Member.Tags["id"], Name: self.Member.Name,
		Cluster: self.Member.Tags["region"]}
	if role.Cluster == "" {
		role.Cluster, _ = self.Config["Region"].(string)
	}
	if role.ID == "" {
		role.Detail = "the agent's Serf member has no id tag"
	}
	return role, nodeID, nil
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

package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/handover"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// ServerProbe implements agent.ServerProbe over the host's local agents.
type ServerProbe struct{ Local discovery.Local }

// Discover asks the local agents which servers run on the host; what the
// local Nomad agent runs is self, as the agent just asked it.
func (p ServerProbe) Discover(ctx context.Context, self discovery.NomadSelf) ([]string, []store.Server, error) {
	r, err := discovery.DiscoverKnowing(ctx, p.Local, &self)
	if err != nil {
		return nil, nil, err
	}
	var servers []store.Server
	for _, s := range []*discovery.ServerRole{r.Nomad, r.Consul, r.Vault} {
		if s != nil && s.ID != "" {
			servers = append(servers, store.Server{Product: string(s.Product), Cluster: s.Cluster, ID: s.ID})
		}
	}
	return r.Names(), servers, nil
}

// VaultSealed reads the local Vault server's seal status.
func (p ServerProbe) VaultSealed(ctx context.Context) (bool, error) {
	if p.Local.Vault == nil {
		return false, nil
	}
	st, err := p.Local.Vault.Sys().SealStatusWithContext(ctx)
	if err != nil {
		return false, fmt.Errorf("vault seal status: %w", err)
	}
	return st.Sealed, nil
}

// ConsulMaintenance enables or disables the local Consul node's maintenance mode.
func (p ServerProbe) ConsulMaintenance(ctx context.Context, enable bool, reason string) error {
	if p.Local.Consul == nil {
		return nil
	}
	return handover.ConsulMaintenance(ctx, p.Local.Consul.Agent(), enable, reason)
}

// Clusters implements coordinator.ClusterAccess with cluster-wide clients: the
// coordinator's Nomad client, and Consul and Vault clients that reach their
// clusters' servers (CONSUL_HTTP_ADDR, VAULT_ADDR and their tokens).
type Clusters struct {
	Nomad  *nomadapi.Client
	Consul *consulapi.Client
	Vault  *vaultapi.Client
	// NomadRegion is the region the Nomad client's requests go to, when the
	// configuration names it ("": the only region there is, asked of Nomad).
	NomadRegion string

	mu sync.Mutex
	// known: the clusters named so far (KnownClusters); retry: when to ask
	// again for the names not found.
	known map[string]store.Server
	retry time.Time
}

// knownRetry is how long KnownClusters waits before asking again for a
// cluster's name that it could not learn (a Consul or Vault not there).
const knownRetry = 5 * time.Minute

// KnownClusters names the server clusters these clients reach, whatever any
// host record says (membership.Lister): the Nomad region, the Consul
// datacenter and the Vault cluster (named by its own health reads). A name
// that cannot be learnt is asked for again after knownRetry.
func (c *Clusters) KnownClusters(ctx context.Context) []store.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = map[string]store.Server{}
	}
	if time.Now().After(c.retry) {
		c.retry = time.Now().Add(knownRetry)
		if _, ok := c.known["nomad"]; !ok && c.Nomad != nil {
			r := c.NomadRegion
			if r == "" {
				r = nomadRegion(c.Nomad)
			}
			if r != "" {
				c.known["nomad"] = store.Server{Product: string(health.Nomad), Cluster: r}
			}
		}
		if _, ok := c.known["consul"]; !ok && c.Consul != nil {
			if self, err := c.Consul.Agent().Self(); err == nil {
				if dc, _ := self["Config"]["Datacenter"].(string); dc != "" {
					c.known["consul"] = store.Server{Product: string(health.Consul), Cluster: dc}
				}
			}
		}
		if _, ok := c.known["vault"]; !ok && c.Vault != nil {
			if name := vaultClusterName(c.Vault); name != "" {
				c.known["vault"] = store.Server{Product: string(health.Vault), Cluster: name}
			}
		}
	}
	out := make([]store.Server, 0, len(c.known))
	for _, k := range []string{"nomad", "consul", "vault"} {
		if s, ok := c.known[k]; ok {
			out = append(out, s)
		}
	}
	return out
}

// vaultClusterName is the Vault cluster's name, from its health (which needs
// no token), asked once without the client's retries: "" when Vault does not
// answer.
func vaultClusterName(v *vaultapi.Client) string {
	probe, err := v.Clone()
	if err != nil {
		return ""
	}
	probe.SetMaxRetries(0)
	hr, err := probe.Sys().Health()
	if err != nil || hr == nil {
		return ""
	}
	return hr.ClusterName
}

// nomadRegion is the only region there is (GET /v1/regions needs no ACL
// rule), "" when there are several or they cannot be listed.
func nomadRegion(n *nomadapi.Client) string {
	regions, err := n.Regions().List()
	if err == nil && len(regions) == 1 {
		return regions[0]
	}
	return ""
}

// ClustersFromEnv builds the Consul and Vault clients from their usual
// environment variables, beside the given Nomad client.
func ClustersFromEnv(n *nomadapi.Client) (*Clusters, error) {
	c, err := deadline.ConsulClient(consulapi.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	vc := vaultapi.DefaultConfig()
	if vc.Error != nil {
		return nil, fmt.Errorf("vault client: %w", vc.Error)
	}
	v, err := vaultapi.NewClient(deadline.VaultConfig(vc))
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	return &Clusters{Nomad: n, Consul: c, Vault: v}, nil
}

// Read reads one cluster's health.
func (c *Clusters) Read(ctx context.Context, product, cluster string) health.ClusterHealth {
	switch p := health.Product(product); {
	case p == health.Nomad && c.Nomad != nil:
		return health.ReadNomad(ctx, c.Nomad.Operator(), cluster)
	case p == health.Consul && c.Consul != nil:
		return health.ReadConsul(ctx, c.Consul.Operator(), cluster)
	case p == health.Vault && c.Vault != nil:
		return health.ReadVault(ctx, c.Vault.Sys(), nil)
	case p == health.Nomad || p == health.Consul || p == health.Vault:
		return health.ClusterHealth{Product: p, Cluster: cluster, Err: fmt.Errorf("no %s client configured", product)}
	}
	return health.ClusterHealth{Product: health.Product(product), Cluster: cluster, Err: fmt.Errorf("unknown product %q", product)}
}

// HandOver moves the leadership of product away from serverID.
func (c *Clusters) HandOver(ctx context.Context, product, serverID string) error {
	switch health.Product(product) {
	case health.Nomad:
		return handover.Nomad(ctx, c.Nomad.Operator(), serverID)
	case health.Consul:
		return handover.Consul(ctx, c.Consul.Operator(), serverID)
	case health.Vault:
		return handover.Vault(ctx, c.Vault.Sys(), serverID)
	}
	return fmt.Errorf("unknown product %q", product)
}

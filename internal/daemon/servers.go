package daemon

import (
	"context"
	"fmt"

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

// Discover asks the local agents which servers run on the host.
func (p ServerProbe) Discover(ctx context.Context) ([]string, []store.Server, error) {
	r, err := discovery.Discover(ctx, p.Local)
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

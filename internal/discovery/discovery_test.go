package discovery

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/health/healthtest"
)

func TestIsLocalAddress(t *testing.T) {
	tests := []struct {
		addr    string
		want    bool
		wantErr bool
	}{
		{"http://127.0.0.1:8200", true, false},
		{"https://localhost:8501", true, false},
		{"127.0.0.1:8500", true, false},
		{"http://[::1]:8200", true, false},
		{"unix:///run/vault.sock", true, false},
		{"http://0.0.0.0:8500", true, false},
		// A cluster address elsewhere answers for another node.
		{"https://192.0.2.10:8200", false, false},
		// A name that cannot be looked up is no answer: an error, never "elsewhere".
		{"https://vault.invalid:8200", false, true},
		{"http://%zz:8200", false, true},
	}
	for _, tc := range tests {
		got, err := IsLocalAddress(context.Background(), net.DefaultResolver, tc.addr)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("IsLocalAddress(%q) = %v, %v; want %v, error %v", tc.addr, got, err, tc.want, tc.wantErr)
		}
	}
}

// A Vault or Consul address that is not this machine (a cluster address) answers
// for another node: Discover must not take that node's role as this host's.
func TestDiscoverIgnoresRemoteAddresses(t *testing.T) {
	vc := vaultapi.DefaultConfig()
	vc.Address = "https://192.0.2.10:8200"
	v, err := vaultapi.NewClient(vc)
	if err != nil {
		t.Fatal(err)
	}
	cc := consulapi.DefaultConfig()
	cc.Address = "192.0.2.11:8500"
	c, err := consulapi.NewClient(cc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Discover(context.Background(), Local{Vault: v, Consul: c, ConsulAddr: cc.Address})
	if err != nil {
		t.Fatal(err)
	}
	if r.Vault != nil || r.Consul != nil {
		t.Errorf("roles from remote addresses: %+v", r)
	}
}

func TestDiscover(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := healthtest.NewEnv(t, n)
			ctx := healthtest.Ctx(t)
			ch := health.ReadConsul(ctx, e.Consul.Operator(), "")
			for _, h := range e.Sim.Hosts() {
				local := Local{
					Host:   h.Name,
					Nomad:  healthtest.NomadClient(t, "http://"+h.Addr, e.Sim.ManagementToken()),
					Consul: healthtest.ConsulClient(t, healthtest.RefusedAddr(t)),
					Vault:  healthtest.VaultClient(t, healthtest.RefusedAddr(t)),
				}
				if h.Server == nil {
					roles, err := Discover(ctx, local)
					if err != nil || roles.Nomad != nil || roles.Consul != nil || roles.Vault != nil || roles.NomadNodeID != h.NodeID {
						t.Fatalf("client host %s: %+v, %v", h.Name, roles, err)
					}
					if names := roles.Names(); len(names) != 1 || names[0] != "nomad-client" {
						t.Fatalf("client host names %v", names)
					}
					continue
				}
				local.Consul = healthtest.ConsulClient(t, h.ConsulAddr)
				local.Vault = healthtest.VaultClient(t, h.VaultAddr)
				local.Hostname = h.Name
				roles, err := Discover(ctx, local)
				if err != nil {
					t.Fatalf("%s: %v", h.Name, err)
				}
				if r := roles.Nomad; r == nil || r.ID != h.Server.ID || r.Cluster != "global" {
					t.Fatalf("%s: nomad role %+v, want ID %s", h.Name, r, h.Server.ID)
				}
				want, _ := healthtest.ServerByName(ch, h.Name)
				if r := roles.Consul; r == nil || r.ID != want.ID || r.ID == "" || r.Cluster != "dc1" || r.Name != h.Name {
					t.Fatalf("%s: consul role %+v, want ID %s", h.Name, r, want.ID)
				}
				if r := roles.Vault; r == nil || r.ID != h.Name || !strings.HasPrefix(r.Cluster, "vault-cluster-") {
					t.Fatalf("%s: vault role %+v", h.Name, r)
				}
				if len(roles.Names()) != 3 {
					t.Fatalf("%s: names %v", h.Name, roles.Names())
				}
				// The active Vault node is found without the host name.
				if h.Name == e.Sim.VaultActive() {
					local.Hostname = ""
					if roles, err := Discover(ctx, local); err != nil || roles.Vault == nil || roles.Vault.ID != h.Name {
						t.Fatalf("active vault without hostname: %+v %v", roles.Vault, err)
					}
				}
			}
		})
	}
}

// A server host that is rebooting drops connections: that is an error, not "no
// server here".
func TestDiscoverHostDown(t *testing.T) {
	e := healthtest.NewEnv(t, 3)
	h := e.Sim.Hosts()[0]
	if err := e.Sim.Reboot(h.Name); err != nil {
		t.Fatal(err)
	}
	for name, local := range map[string]Local{
		"nomad":  {Nomad: healthtest.NomadClient(t, "http://"+h.Addr, "")},
		"consul": {Consul: healthtest.ConsulClient(t, h.ConsulAddr)},
		"vault":  {Vault: healthtest.VaultClient(t, h.VaultAddr)},
	} {
		if roles, err := Discover(healthtest.Ctx(t), local); err == nil {
			t.Fatalf("%s: no error for a host that is down: %+v", name, roles)
		}
	}
}

func TestLocalFromEnv(t *testing.T) {
	addr := healthtest.RefusedAddr(t)
	t.Setenv("NOMAD_ADDR", "http://"+addr)
	t.Setenv("NOMAD_TOKEN", "secret-nomad-token")
	t.Setenv("CONSUL_HTTP_ADDR", addr)
	t.Setenv("CONSUL_HTTP_TOKEN", "secret-consul-token")
	t.Setenv("VAULT_ADDR", "http://"+addr)
	t.Setenv("VAULT_TOKEN", "secret-vault-token")
	t.Setenv("VAULT_RAFT_NODE_ID", "node-7")
	l, err := LocalFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if l.Nomad.Address() != "http://"+addr || l.Vault.Address() != "http://"+addr || l.VaultNodeID != "node-7" {
		t.Fatalf("addresses %q %q", l.Nomad.Address(), l.Vault.Address())
	}
	roles, err := Discover(healthtest.Ctx(t), l)
	if err != nil || roles.Nomad != nil || roles.Consul != nil || roles.Vault != nil {
		t.Fatalf("nothing listens: %+v %v", roles, err)
	}
	// A listener that answers garbage is an error, and the error has no token.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	go func() {
		for {
			c, err := l2.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Setenv("NOMAD_ADDR", "http://"+l2.Addr().String())
	l, err = LocalFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Discover(healthtest.Ctx(t), l)
	if err == nil || strings.Contains(err.Error(), "secret-") {
		t.Fatalf("want an error without a token, got %v", err)
	}
}

// Package healthtest starts emulated Nomad, Consul and Vault server clusters
// (package nomadsim, on real sockets) and gives the real clients of each, for
// the tests of packages health, discovery and handover.
package healthtest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/watch"
)

// VaultToken is the token VaultClient sets.
const VaultToken = "test-vault-token"

// Env is an emulated cluster with Nomad, Consul and Vault servers, and clients of
// its cluster addresses (Nomad with the management token).
type Env struct {
	Sim    *nomadsim.Sim
	Nomad  *nomadapi.Client
	Consul *consulapi.Client
	Vault  *vaultapi.Client
}

// NewEnv starts a cluster of servers server hosts and one client host, with ACLs,
// and waits until every cluster has a leader and is healthy. It is closed when
// the test ends.
func NewEnv(t *testing.T, servers int) *Env {
	t.Helper()
	s, err := nomadsim.New(nomadsim.Config{Servers: servers, Clients: 1, ACL: true,
		ConsulServers: true, VaultServers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e := &Env{Sim: s}
	e.Nomad = NomadClient(t, s.Address(), s.ManagementToken())
	e.Consul = ConsulClient(t, s.ConsulAddress())
	e.Vault = VaultClient(t, s.VaultAddress())
	ctx := Ctx(t)
	Wait(t, ctx, "all healthy", func() []health.ClusterHealth { return e.ReadAll(ctx) }, func(hs []health.ClusterHealth) bool {
		for _, h := range hs {
			if h.Err != nil || !h.Healthy {
				return false
			}
		}
		return true
	})
	return e
}

// ReadAll reads the health of the three clusters.
func (e *Env) ReadAll(ctx context.Context) []health.ClusterHealth {
	return []health.ClusterHealth{
		health.ReadNomad(ctx, e.Nomad.Operator(), ""),
		health.ReadConsul(ctx, e.Consul.Operator(), ""),
		health.ReadVault(ctx, e.Vault.Sys(), nil),
	}
}

// VaultNodes are clients of every Vault node, keyed by node ID (the host name).
func (e *Env) VaultNodes(t *testing.T) map[string]health.VaultHealth {
	t.Helper()
	out := map[string]health.VaultHealth{}
	for _, h := range e.Sim.Hosts() {
		if h.VaultAddr != "" {
			out[h.Name] = VaultClient(t, h.VaultAddr).Sys()
		}
	}
	return out
}

// NomadClient is a Nomad client of addr with token.
func NomadClient(t *testing.T, addr, token string) *nomadapi.Client {
	t.Helper()
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: addr, SecretID: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ConsulClient is a Consul client of addr.
func ConsulClient(t *testing.T, addr string) *consulapi.Client {
	t.Helper()
	c, err := consulapi.NewClient(&consulapi.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// VaultClient is a Vault client of addr (http:// added when it has no scheme)
// with VaultToken and no retries.
func VaultClient(t *testing.T, addr string) *vaultapi.Client {
	t.Helper()
	if !strings.HasPrefix(addr, "http") {
		addr = "http://" + addr
	}
	c, err := vaultapi.NewClient(&vaultapi.Config{Address: addr, MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	c.SetMaxRetries(0)
	c.SetToken(VaultToken)
	return c
}

// Ctx is a context that ends after 10s or with the test.
func Ctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Wait calls read until ok accepts its result, with a backoff from 25ms to
// 500ms, and fails the test when ctx ends first. It returns the accepted result.
func Wait[T any](t *testing.T, ctx context.Context, what string, read func() T, ok func(T) bool) T {
	t.Helper()
	wait := 25 * time.Millisecond
	for {
		last := read()
		if ok(last) {
			return last
		}
		if !watch.Sleep(ctx, wait) {
			t.Fatalf("waiting for %s: %v; last: %+v", what, ctx.Err(), last)
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// LastLeaderHost is the host of the latest leader event of the given type ("" if
// the latest one names no leader).
func LastLeaderHost(s *nomadsim.Sim, typ string) string {
	host := ""
	for _, ev := range s.Events(0) {
		if ev.Type == typ {
			host = ""
			if ev.Details["id"] != "" {
				host = ev.Host
			}
		}
	}
	return host
}

// ServerByName finds the server named name (or name.<region>, as Nomad names
// its servers).
func ServerByName(h health.ClusterHealth, name string) (health.ServerHealth, bool) {
	for _, s := range h.Servers {
		if s.Name == name || strings.HasPrefix(s.Name, name+".") {
			return s, true
		}
	}
	return health.ServerHealth{}, false
}

// RefusedAddr is an address where nothing listens.
func RefusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

const vaultToken = "test-vault-token"

type env struct {
	sim    *nomadsim.Sim
	nomad  *nomadapi.Client
	consul *consulapi.Client
	vault  *vaultapi.Client
}

func newEnv(t *testing.T, servers int) *env {
	t.Helper()
	s, err := nomadsim.New(nomadsim.Config{Servers: servers, Clients: 1, ACL: true,
		ConsulServers: true, VaultServers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e := &env{sim: s}
	e.nomad = nomadClient(t, s.Address(), s.ManagementToken())
	e.consul = consulClient(t, s.ConsulAddress())
	e.vault = vaultClient(t, s.VaultAddress())
	// Wait until every cluster has a leader and is healthy.
	ctx := testCtx(t)
	waitHealth(t, ctx, "all healthy", func() []ClusterHealth { return e.readAll(ctx) }, func(hs []ClusterHealth) bool {
		for _, h := range hs {
			if h.Err != nil || !h.Healthy {
				return false
			}
		}
		return true
	})
	return e
}

func nomadClient(t *testing.T, addr, token string) *nomadapi.Client {
	t.Helper()
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: addr, SecretID: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func consulClient(t *testing.T, addr string) *consulapi.Client {
	t.Helper()
	c, err := consulapi.NewClient(&consulapi.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vaultClient(t *testing.T, addr string) *vaultapi.Client {
	t.Helper()
	if !strings.HasPrefix(addr, "http") {
		addr = "http://" + addr
	}
	c, err := vaultapi.NewClient(&vaultapi.Config{Address: addr, MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	c.SetMaxRetries(0)
	c.SetToken(vaultToken)
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// vaultNodes are clients of every Vault node, keyed by node ID (the host name).
func (e *env) vaultNodes(t *testing.T) map[string]VaultHealth {
	out := map[string]VaultHealth{}
	for _, h := range e.sim.Hosts() {
		if h.VaultAddr != "" {
			out[h.Name] = vaultClient(t, h.VaultAddr).Sys()
		}
	}
	return out
}

func (e *env) readAll(ctx context.Context) []ClusterHealth {
	return []ClusterHealth{
		ReadNomad(ctx, e.nomad.Operator(), ""),
		ReadConsul(ctx, e.consul.Operator(), ""),
		ReadVault(ctx, e.vault.Sys(), nil),
	}
}

// waitHealth polls read until ok, with the context's deadline.
func waitHealth[T any](t *testing.T, ctx context.Context, what string, read func() T, ok func(T) bool) T {
	t.Helper()
	var last T
	err := poll(ctx, what, func() (bool, error) {
		last = read()
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("%v; last: %+v", err, last)
	}
	return last
}

// lastLeaderHost is the host of the latest leader event of the given type.
func lastLeaderHost(s *nomadsim.Sim, typ string) string {
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

func serverByName(h ClusterHealth, name string) (ServerHealth, bool) {
	for _, s := range h.Servers {
		if s.Name == name || strings.HasPrefix(s.Name, name+".") {
			return s, true
		}
	}
	return ServerHealth{}, false
}

func TestReadersMatchEmulator(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t, n)
			ctx := testCtx(t)
			wantFT := n - (n/2 + 1)
			hosts := e.sim.Hosts()
			for _, h := range e.readAll(ctx) {
				if h.Err != nil || !h.Healthy || h.FailureTolerance != wantFT || len(h.Servers) != n {
					t.Fatalf("%s: %+v, want healthy FT %d with %d servers", h.Product, h, wantFT, n)
				}
				for _, srv := range h.Servers {
					if !srv.Healthy || !srv.Voter || srv.Sealed || srv.Leader != (srv.ID == h.Leader) {
						t.Fatalf("%s: server %+v", h.Product, srv)
					}
				}
			}
			nh, ch, vh := ReadNomad(ctx, e.nomad.Operator(), "global"), ReadConsul(ctx, e.consul.Operator(), "dc1"),
				ReadVault(ctx, e.vault.Sys(), e.vaultNodes(t))
			if nh.Cluster != "global" || ch.Cluster != "dc1" || !strings.HasPrefix(vh.Cluster, "vault-cluster-") {
				t.Fatalf("clusters %q %q %q", nh.Cluster, ch.Cluster, vh.Cluster)
			}
			// Leaders as the emulator reports them.
			nl := lastLeaderHost(e.sim, nomadsim.EventLeader)
			if h, _ := e.sim.Host(nl); h.Server == nil || nh.Leader != h.Server.ID {
				t.Fatalf("nomad leader %q, emulator says host %q", nh.Leader, nl)
			}
			if s, ok := serverByName(ch, e.sim.ConsulLeader()); !ok || ch.Leader != s.ID {
				t.Fatalf("consul leader %q, emulator says %q", ch.Leader, e.sim.ConsulLeader())
			}
			if vh.Leader != e.sim.VaultActive() {
				t.Fatalf("vault leader %q, emulator says %q", vh.Leader, e.sim.VaultActive())
			}

			// One unhealthy server in each product: Nomad answers 429, parsed.
			victim := hosts[1].Name
			if err := e.sim.SetServerHealthy(victim, false); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.SetConsulServerHealthy(victim, false); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.SealVault(victim); err != nil {
				t.Fatal(err)
			}
			nodes := e.vaultNodes(t)
			got := waitHealth(t, ctx, "one unhealthy server each", func() []ClusterHealth {
				return []ClusterHealth{ReadNomad(ctx, e.nomad.Operator(), ""), ReadConsul(ctx, e.consul.Operator(), ""),
					ReadVault(ctx, e.vault.Sys(), nodes)}
			}, func(hs []ClusterHealth) bool {
				for _, h := range hs {
					if h.Err != nil || h.Healthy || h.Leader == "" {
						return false
					}
				}
				return true
			})
			for _, h := range got {
				if h.FailureTolerance != max(0, wantFT-1) {
					t.Fatalf("%s: FT %d, want %d", h.Product, h.FailureTolerance, max(0, wantFT-1))
				}
				bad, ok := serverByName(h, victim)
				if !ok || bad.Healthy {
					t.Fatalf("%s: victim %+v", h.Product, bad)
				}
				if h.Product == Vault && !bad.Sealed {
					t.Fatalf("vault victim not sealed: %+v", bad)
				}
				other := h.Servers[0]
				if other.ID == bad.ID {
					other = h.Servers[1]
				}
				if ok, reason := PreRebootGate(h, other.ID); ok || !strings.Contains(reason, victim) {
					t.Fatalf("%s: gate for %s open or reason without victim: %q", h.Product, other.ID, reason)
				}
			}
			if ok, reason := PostRebootGate(got[2], victim, time.Now(), 0); ok || !strings.Contains(reason, "unseal is needed") {
				t.Fatalf("vault post gate: %v %q", ok, reason)
			}

			// Recovery: the post-reboot gate opens once stable.
			_ = e.sim.SetServerHealthy(victim, true)
			_ = e.sim.SetConsulServerHealthy(victim, true)
			if err := e.sim.UnsealVault(victim); err != nil {
				t.Fatal(err)
			}
			waitHealth(t, ctx, "victim back", func() []ClusterHealth {
				return []ClusterHealth{ReadNomad(ctx, e.nomad.Operator(), ""), ReadConsul(ctx, e.consul.Operator(), ""),
					ReadVault(ctx, e.vault.Sys(), nodes)}
			}, func(hs []ClusterHealth) bool {
				for _, h := range hs {
					s, found := serverByName(h, victim)
					if ok, _ := PostRebootGate(h, s.ID, time.Now(), 0); !found || !ok {
						return false
					}
				}
				return true
			})
		})
	}
}

// With Nomad's leader lost the autopilot read fails (500): the gate is closed with
// the reason.
func TestReadNomadError(t *testing.T) {
	e := newEnv(t, 3)
	if err := e.sim.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	h := ReadNomad(testCtx(t), e.nomad.Operator(), "")
	if ok, reason := PreRebootGate(h, "x"); h.Err == nil || ok || !strings.Contains(reason, "No cluster leader") {
		t.Fatalf("got %+v, %v %q", h, ok, reason)
	}
}

// refusedAddr is an address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestDiscover(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t, n)
			ctx := testCtx(t)
			ch := ReadConsul(ctx, e.consul.Operator(), "")
			for _, h := range e.sim.Hosts() {
				local := Local{
					Nomad:  nomadClient(t, "http://"+h.Addr, e.sim.ManagementToken()),
					Consul: consulClient(t, refusedAddr(t)),
					Vault:  vaultClient(t, refusedAddr(t)),
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
				local.Consul = consulClient(t, h.ConsulAddr)
				local.Vault = vaultClient(t, h.VaultAddr)
				local.Hostname = h.Name
				roles, err := Discover(ctx, local)
				if err != nil {
					t.Fatalf("%s: %v", h.Name, err)
				}
				if r := roles.Nomad; r == nil || r.ID != h.Server.ID || r.Cluster != "global" {
					t.Fatalf("%s: nomad role %+v, want ID %s", h.Name, r, h.Server.ID)
				}
				want, _ := serverByName(ch, h.Name)
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
				if h.Name == e.sim.VaultActive() {
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
	e := newEnv(t, 3)
	h := e.sim.Hosts()[0]
	if err := e.sim.Reboot(h.Name); err != nil {
		t.Fatal(err)
	}
	for name, local := range map[string]Local{
		"nomad":  {Nomad: nomadClient(t, "http://"+h.Addr, "")},
		"consul": {Consul: consulClient(t, h.ConsulAddr)},
		"vault":  {Vault: vaultClient(t, h.VaultAddr)},
	} {
		if roles, err := Discover(testCtx(t), local); err == nil {
			t.Fatalf("%s: no error for a host that is down: %+v", name, roles)
		}
	}
}

func TestLocalFromEnv(t *testing.T) {
	addr := refusedAddr(t)
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
	roles, err := Discover(testCtx(t), l)
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
	_, err = Discover(testCtx(t), l)
	if err == nil || strings.Contains(err.Error(), "secret-") {
		t.Fatalf("want an error without a token, got %v", err)
	}
}

func TestHandOver(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t, n)
			ctx := testCtx(t)

			nh := ReadNomad(ctx, e.nomad.Operator(), "")
			// Denied without a management token.
			reader := e.sim.CreateToken("reader", &nomadsim.Policy{Operator: &nomadsim.LevelPolicy{Policy: "read"}})
			err := HandOverNomad(ctx, nomadClient(t, e.sim.Address(), reader.SecretID).Operator(), nh.Leader)
			var denied *DeniedError
			if !errors.Is(err, ErrDenied) || !errors.As(err, &denied) || denied.Product != Nomad {
				t.Fatalf("want denied, got %v", err)
			}
			// A follower: nothing to do.
			var follower string
			for _, s := range nh.Servers {
				if s.ID != nh.Leader {
					follower = s.ID
				}
			}
			if err := HandOverNomad(ctx, e.nomad.Operator(), follower); err != nil {
				t.Fatal(err)
			}
			if got := ReadNomad(ctx, e.nomad.Operator(), ""); got.Leader != nh.Leader {
				t.Fatalf("follower hand-over moved the leader")
			}
			if err := HandOverNomad(ctx, e.nomad.Operator(), nh.Leader); err != nil {
				t.Fatal(err)
			}
			if got := ReadNomad(ctx, e.nomad.Operator(), ""); got.Leader == "" || got.Leader == nh.Leader {
				t.Fatalf("nomad leader still %q", got.Leader)
			}
			if h, _ := e.sim.Host(lastLeaderHost(e.sim, nomadsim.EventLeader)); h.Server == nil || h.Server.ID == nh.Leader {
				t.Fatalf("emulator leader did not move")
			}

			oldConsul := e.sim.ConsulLeader()
			ch := ReadConsul(ctx, e.consul.Operator(), "")
			if err := HandOverConsul(ctx, e.consul.Operator(), ch.Leader); err != nil {
				t.Fatal(err)
			}
			if l := e.sim.ConsulLeader(); l == "" || l == oldConsul {
				t.Fatalf("consul leader %q, was %q", l, oldConsul)
			}

			oldVault := e.sim.VaultActive()
			if err := StepDownVault(ctx, e.vault.Sys(), oldVault); err != nil {
				t.Fatal(err)
			}
			if a := e.sim.VaultActive(); a == "" || a == oldVault {
				t.Fatalf("vault active %q, was %q", a, oldVault)
			}
			// Without a token Vault answers 403.
			noToken := vaultClient(t, e.sim.VaultAddress())
			noToken.ClearToken()
			if err := StepDownVault(ctx, noToken.Sys(), e.sim.VaultActive()); !errors.Is(err, ErrDenied) {
				t.Fatalf("step-down without a token: want denied, got %v", err)
			}
		})
	}
}

// With every other server unhealthy there is nobody to take over.
func TestHandOverNoTarget(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	leader := e.sim.ConsulLeader()
	for _, h := range e.sim.Hosts() {
		if h.Server != nil && h.Name != leader {
			if err := e.sim.SetConsulServerHealthy(h.Name, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	ch := ReadConsul(ctx, e.consul.Operator(), "")
	if err := HandOverConsul(ctx, e.consul.Operator(), ch.Leader); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("want ErrNoTarget, got %v (health %+v)", err, ch)
	}
}

func TestConsulMaintenance(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	h := e.sim.Hosts()[1]
	local := consulClient(t, h.ConsulAddr)
	checks := func() map[string]*consulapi.AgentCheck {
		t.Helper()
		c, err := local.Agent().Checks()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := ConsulMaintenance(ctx, local.Agent(), true, "rollboot: kernel update"); err != nil {
		t.Fatal(err)
	}
	if c, ok := checks()["_node_maintenance"]; !ok || c.Notes != "rollboot: kernel update" || c.Status != consulapi.HealthCritical {
		t.Fatalf("maintenance check %+v", c)
	}
	if err := ConsulMaintenance(ctx, local.Agent(), false, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := checks()["_node_maintenance"]; ok {
		t.Fatal("maintenance still on")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := ConsulMaintenance(cancelled, local.Agent(), true, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled, got %v", err)
	}
}

package health_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/health/healthtest"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

func TestReadersMatchEmulator(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := healthtest.NewEnv(t, n)
			ctx := healthtest.Ctx(t)
			wantFT := n - (n/2 + 1)
			hosts := e.Sim.Hosts()
			for _, h := range e.ReadAll(ctx) {
				if h.Err != nil || !h.Healthy || h.FailureTolerance != wantFT || len(h.Servers) != n {
					t.Fatalf("%s: %+v, want healthy FT %d with %d servers", h.Product, h, wantFT, n)
				}
				for _, srv := range h.Servers {
					if !srv.Healthy || !srv.Voter || srv.Sealed || srv.Leader != (srv.ID == h.Leader) {
						t.Fatalf("%s: server %+v", h.Product, srv)
					}
				}
			}
			nh, ch, vh := health.ReadNomad(ctx, e.Nomad.Operator(), "global"), health.ReadConsul(ctx, e.Consul.Operator(), "dc1"),
				health.ReadVault(ctx, e.Vault.Sys(), e.VaultNodes(t))
			if nh.Cluster != "global" || ch.Cluster != "dc1" || !strings.HasPrefix(vh.Cluster, "vault-cluster-") {
				t.Fatalf("clusters %q %q %q", nh.Cluster, ch.Cluster, vh.Cluster)
			}
			// Leaders as the emulator reports them.
			nl := healthtest.LastLeaderHost(e.Sim, nomadsim.EventLeader)
			if h, _ := e.Sim.Host(nl); h.Server == nil || nh.Leader != h.Server.ID {
				t.Fatalf("nomad leader %q, emulator says host %q", nh.Leader, nl)
			}
			if s, ok := healthtest.ServerByName(ch, e.Sim.ConsulLeader()); !ok || ch.Leader != s.ID {
				t.Fatalf("consul leader %q, emulator says %q", ch.Leader, e.Sim.ConsulLeader())
			}
			if vh.Leader != e.Sim.VaultActive() {
				t.Fatalf("vault leader %q, emulator says %q", vh.Leader, e.Sim.VaultActive())
			}

			// One unhealthy server in each product: health.Nomad answers 429, parsed.
			victim := hosts[1].Name
			if err := e.Sim.SetServerHealthy(victim, false); err != nil {
				t.Fatal(err)
			}
			if err := e.Sim.SetConsulServerHealthy(victim, false); err != nil {
				t.Fatal(err)
			}
			if err := e.Sim.SealVault(victim); err != nil {
				t.Fatal(err)
			}
			nodes := e.VaultNodes(t)
			got := healthtest.Wait(t, ctx, "one unhealthy server each", func() []health.ClusterHealth {
				return []health.ClusterHealth{health.ReadNomad(ctx, e.Nomad.Operator(), ""), health.ReadConsul(ctx, e.Consul.Operator(), ""),
					health.ReadVault(ctx, e.Vault.Sys(), nodes)}
			}, func(hs []health.ClusterHealth) bool {
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
				bad, ok := healthtest.ServerByName(h, victim)
				if !ok || bad.Healthy {
					t.Fatalf("%s: victim %+v", h.Product, bad)
				}
				if h.Product == health.Vault && !bad.Sealed {
					t.Fatalf("vault victim not sealed: %+v", bad)
				}
				other := h.Servers[0]
				if other.ID == bad.ID {
					other = h.Servers[1]
				}
				if ok, reason := health.PreRebootGate(h, other.ID); ok || !strings.Contains(reason, victim) {
					t.Fatalf("%s: gate for %s open or reason without victim: %q", h.Product, other.ID, reason)
				}
			}
			if ok, reason := health.PostRebootGate(got[2], victim, time.Now(), 0); ok || !strings.Contains(reason, "unseal is needed") {
				t.Fatalf("vault post gate: %v %q", ok, reason)
			}

			// Recovery: the post-reboot gate opens once stable.
			_ = e.Sim.SetServerHealthy(victim, true)
			_ = e.Sim.SetConsulServerHealthy(victim, true)
			if err := e.Sim.UnsealVault(victim); err != nil {
				t.Fatal(err)
			}
			healthtest.Wait(t, ctx, "victim back", func() []health.ClusterHealth {
				return []health.ClusterHealth{health.ReadNomad(ctx, e.Nomad.Operator(), ""), health.ReadConsul(ctx, e.Consul.Operator(), ""),
					health.ReadVault(ctx, e.Vault.Sys(), nodes)}
			}, func(hs []health.ClusterHealth) bool {
				for _, h := range hs {
					s, found := healthtest.ServerByName(h, victim)
					if ok, _ := health.PostRebootGate(h, s.ID, time.Now(), 0); !found || !ok {
						return false
					}
				}
				return true
			})
		})
	}
}

// With health.Nomad's leader lost the autopilot read fails (500): the gate is closed with
// the reason.
func TestReadNomadError(t *testing.T) {
	e := healthtest.NewEnv(t, 3)
	if err := e.Sim.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	h := health.ReadNomad(healthtest.Ctx(t), e.Nomad.Operator(), "")
	if ok, reason := health.PreRebootGate(h, "x"); h.Err == nil || ok || !strings.Contains(reason, "No cluster leader") {
		t.Fatalf("got %+v, %v %q", h, ok, reason)
	}
}

// Through the readers and the emulator: a rebooted server host's health.Nomad and health.Consul
// servers come back as non-voters, and the gate opens only once autopilot promoted
// them.
func TestPostRebootGateSeesNonVoter(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Servers: 3, ConsulServers: true, BootTime: time.Second,
		ServerStabilizeTime: 100 * time.Millisecond, AutopilotInterval: 50 * time.Millisecond,
		AutopilotStabilizationTime: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := healthtest.Ctx(t)
	nomad := healthtest.NomadClient(t, s.Address(), "").Operator()
	consul := healthtest.ConsulClient(t, s.ConsulAddress()).Operator()
	var host string
	for _, h := range s.Hosts() {
		if h.Server != nil && h.Name != healthtest.LastLeaderHost(s, nomadsim.EventLeader) && h.Name != s.ConsulLeader() {
			host = h.Name
		}
	}
	if err := s.Reboot(host); err != nil {
		t.Fatal(err)
	}
	reads := map[health.Product]func() health.ClusterHealth{
		health.Nomad:  func() health.ClusterHealth { return health.ReadNomad(ctx, nomad, "") },
		health.Consul: func() health.ClusterHealth { return health.ReadConsul(ctx, consul, "") },
	}
	// Both products are watched at once: their non-voter phases overlap in time.
	sawNonVoter, open := map[health.Product]bool{}, map[health.Product]bool{}
	healthtest.Wait(t, ctx, "both servers back as voters", func() bool {
		for p, read := range reads {
			h := read()
			srv, found := healthtest.ServerByName(h, host)
			if !found || open[p] {
				continue
			}
			ok, why := health.PostRebootGate(h, srv.ID, time.Now(), 0)
			switch {
			case !srv.Voter && srv.Healthy:
				sawNonVoter[p] = true
				if ok || !strings.Contains(why, "non-voter") {
					t.Errorf("%s: gate %v %q for a non-voter", p, ok, why)
				}
			case ok:
				if !srv.Voter || h.FailureTolerance != 1 {
					t.Errorf("%s: gate open with %+v, tolerance %d", p, srv, h.FailureTolerance)
				}
				open[p] = true
			}
		}
		return open[health.Nomad] && open[health.Consul]
	}, func(done bool) bool { return done })
	if !sawNonVoter[health.Nomad] || !sawNonVoter[health.Consul] {
		t.Fatalf("no non-voter phase seen: %v", sawNonVoter)
	}
}

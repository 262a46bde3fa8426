package handover

import (
	"context"
	"errors"
	"fmt"
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/health/healthtest"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

func TestHandOver(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := healthtest.NewEnv(t, n)
			ctx := healthtest.Ctx(t)

			nh := health.ReadNomad(ctx, e.Nomad.Operator(), "")
			// Denied without a management token.
			reader := e.Sim.CreateToken("reader", &nomadsim.Policy{Operator: &nomadsim.LevelPolicy{Policy: "read"}})
			err := Nomad(ctx, healthtest.NomadClient(t, e.Sim.Address(), reader.SecretID).Operator(), nh.Leader)
			var de *health.DeniedError
			if !errors.Is(err, health.ErrDenied) || !errors.As(err, &de) || de.Product != health.Nomad {
				t.Fatalf("want denied, got %v", err)
			}
			// A follower: nothing to do.
			var follower string
			for _, s := range nh.Servers {
				if s.ID != nh.Leader {
					follower = s.ID
				}
			}
			if err := Nomad(ctx, e.Nomad.Operator(), follower); err != nil {
				t.Fatal(err)
			}
			if got := health.ReadNomad(ctx, e.Nomad.Operator(), ""); got.Leader != nh.Leader {
				t.Fatalf("follower hand-over moved the leader")
			}
			if err := Nomad(ctx, e.Nomad.Operator(), nh.Leader); err != nil {
				t.Fatal(err)
			}
			if got := health.ReadNomad(ctx, e.Nomad.Operator(), ""); got.Leader == "" || got.Leader == nh.Leader {
				t.Fatalf("nomad leader still %q", got.Leader)
			}
			if h, _ := e.Sim.Host(healthtest.LastLeaderHost(e.Sim, nomadsim.EventLeader)); h.Server == nil || h.Server.ID == nh.Leader {
				t.Fatalf("emulator leader did not move")
			}

			oldConsul := e.Sim.ConsulLeader()
			ch := health.ReadConsul(ctx, e.Consul.Operator(), "")
			if err := Consul(ctx, e.Consul.Operator(), ch.Leader); err != nil {
				t.Fatal(err)
			}
			if l := e.Sim.ConsulLeader(); l == "" || l == oldConsul {
				t.Fatalf("consul leader %q, was %q", l, oldConsul)
			}

			oldVault := e.Sim.VaultActive()
			if err := Vault(ctx, e.Vault.Sys(), oldVault); err != nil {
				t.Fatal(err)
			}
			if a := e.Sim.VaultActive(); a == "" || a == oldVault {
				t.Fatalf("vault active %q, was %q", a, oldVault)
			}
			// Without a token Vault answers 403.
			noToken := healthtest.VaultClient(t, e.Sim.VaultAddress())
			noToken.ClearToken()
			if err := Vault(ctx, noToken.Sys(), e.Sim.VaultActive()); !errors.Is(err, health.ErrDenied) {
				t.Fatalf("step-down without a token: want denied, got %v", err)
			}
		})
	}
}

// With every other server unhealthy there is nobody to take over.
func TestHandOverNoTarget(t *testing.T) {
	e := healthtest.NewEnv(t, 3)
	ctx := healthtest.Ctx(t)
	leader := e.Sim.ConsulLeader()
	for _, h := range e.Sim.Hosts() {
		if h.Server != nil && h.Name != leader {
			if err := e.Sim.SetConsulServerHealthy(h.Name, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	ch := health.ReadConsul(ctx, e.Consul.Operator(), "")
	if err := Consul(ctx, e.Consul.Operator(), ch.Leader); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("want ErrNoTarget, got %v (health %+v)", err, ch)
	}
}

func TestConsulMaintenance(t *testing.T) {
	e := healthtest.NewEnv(t, 3)
	ctx := healthtest.Ctx(t)
	h := e.Sim.Hosts()[1]
	local := healthtest.ConsulClient(t, h.ConsulAddr)
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

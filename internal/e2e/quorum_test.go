package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

const quorumPolicy = `
group "clients" {
  filter = "NodePool == \"default\""
  concurrency = 2
}
`

// checkServerReboots checks what the emulator recorded at each server host's
// reboot: every cluster the host serves was healthy and could lose a server
// (invariant 2, also judged by the checker), and the host led none of them: the
// leadership was handed over first.
func checkServerReboots(t *testing.T, c *cluster, want int) {
	t.Helper()
	n := 0
	for _, e := range c.sim.Events(0) {
		if e.Type != nomadsim.EventHostRebootStart || e.Details["nomad_server"] != "true" {
			continue
		}
		n++
		for _, p := range []string{"nomad", "consul", "vault"} {
			if e.Details[p+"_leader"] == "true" {
				t.Errorf("%s rebooted while it led %s (no hand-over)", e.Host, p)
			}
		}
	}
	if n != want {
		t.Errorf("%d server reboots, want %d", n, want)
	}
}

func serverRollout(t *testing.T, servers int) {
	c := newCluster(t, clusterOpts{servers: servers, clients: 2, coordinators: 1, autoUnseal: true,
		policy: quorumPolicy, coordExtra: `  server_stable_for = "200ms"`})
	c.start()
	all := append(c.serverHosts(), c.clients()...)
	c.needReboot(all...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(all))
	spec := invariants.Spec{EligibleBefore: allTrue(c.clients()), Reboots: each(all, 1)}
	c.mustHold(spec)
	checkServerReboots(t, c, servers)
	// Server hosts publish their servers, as the coordinator needs them.
	rec, err := c.st.Host(t.Context(), c.serverHosts()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer} {
		if !slices.Contains(rec.Roles, role) {
			t.Errorf("roles %v lack %s", rec.Roles, role)
		}
	}
	if len(rec.Servers) != 3 {
		t.Errorf("servers %+v", rec.Servers)
	}
}

// Every host of a cluster whose Nomad, Consul and Vault servers share 3 (or 5)
// hosts needs a reboot: the servers go one at a time, only while every cluster is
// healthy and can lose one, each leader handed over first.
func TestServerRollout3(t *testing.T) {
	t.Parallel()
	serverRollout(t, 3)
}

func TestServerRollout5(t *testing.T) {
	t.Parallel()
	serverRollout(t, 5)
}

// At the production resync (30 s), a server host that is back waits for its
// servers to be stable for server_stable_for, and no longer: nothing watches the
// clusters' health, so the coordinator looks again when that wait ends (and
// every few seconds while a gate is closed) instead of at the next resync.
//
// Run: go test -count=1 -v -run TestServerRejoinAtProductionResync ./internal/e2e/
func TestServerRejoinAtProductionResync(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, autoUnseal: true, resync: productionResync,
		policy: quorumPolicy, coordExtra: `  server_stable_for = "2s"`})
	c.start()
	servers := c.serverHosts()
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(servers) })
	c.needReboot(servers...)
	c.waitFor("every server host rebooted", 4*productionResync, c.rebootedAll(servers))
	booted := map[string]time.Time{}
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventHostBoot {
			booted[e.Host] = e.Time
		}
	}
	for _, r := range c.history() {
		if r.Outcome != "rebooted" || booted[r.Host].IsZero() {
			continue
		}
		took := r.Finished.Sub(booted[r.Host])
		t.Logf("%s: booted → cycle closed: %s", r.Host, took.Round(time.Millisecond))
		if took > productionResync/2 {
			t.Errorf("%s: booted → cycle closed took %s with resync_interval %s: it waited for a resync", r.Host, took, productionResync)
		}
	}
	c.mustHold(invariants.Spec{Reboots: each(servers, 1)})
	checkServerReboots(t, c, len(servers))
}

// An unhealthy server stops the rollout of the servers (with the reason) until it
// recovers; a Vault that comes back sealed keeps its host rejoining with a message
// that an unseal is needed, and the rollout goes on once it is unsealed.
func TestServerRolloutStoppedAndResumed(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, policy: quorumPolicy,
		coordExtra: `  server_stable_for = "200ms"`})
	servers := c.serverHosts()
	c.start()
	if err := c.sim.SetConsulServerHealthy(servers[2], false); err != nil {
		t.Fatal(err)
	}
	// Consul's autopilot reports it (429) before any reboot is asked for.
	c.waitFor("Consul to report the unhealthy server", 30*time.Second, func() bool {
		resp, err := http.Get(c.sim.ConsulAddress() + "/v1/operator/autopilot/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	})
	c.needReboot(servers[0], servers[1])
	// Both wait; the first in line says it is the quorum gate (the other waits
	// behind it for the group's slot).
	c.waitFor("the servers held by the gate", 30*time.Second, func() bool {
		plans := c.plans()
		gated := false
		for _, h := range servers[:2] {
			if plans[h].Phase != store.PhasePending {
				return false
			}
			gated = gated || strings.Contains(plans[h].Waiting, "quorum gate")
		}
		return gated
	})
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventHostRebootStart {
			t.Fatalf("a server rebooted while a Consul server was unhealthy: %+v", e)
		}
	}
	if err := c.sim.SetConsulServerHealthy(servers[2], true); err != nil {
		t.Fatal(err)
	}
	// Each rebooted Vault comes back sealed: the host waits for an unseal.
	unsealed := map[string]bool{}
	c.waitFor("both servers rebooted", 120*time.Second, func() bool {
		for h, p := range c.plans() {
			if p.Phase == store.PhaseRejoining && strings.Contains(p.Waiting, "unseal is needed") && !unsealed[h] {
				unsealed[h] = true
				if err := c.sim.UnsealVault(h); err != nil {
					t.Fatal(err)
				}
			}
		}
		return c.rebootedAll(servers[:2])()
	})
	if len(unsealed) != 2 {
		t.Errorf("hosts reported sealed Vaults: %v, want both rebooted servers", unsealed)
	}
	c.mustHold(invariants.Spec{Reboots: map[string]int{servers[0]: 1, servers[1]: 1, servers[2]: 0}})
	checkServerReboots(t, c, 2)
}

// An agent that holds its server host's reboot at the final go/no-go (a Consul
// server elsewhere went unhealthy after the grant) does not keep the slot for
// good: rejoin_timeout after the reboot phase began, the attempt ends as
// "held", with what the agent waited for, and the host backs off. Once the
// server is healthy again the host is granted anew and reboots.
func TestAgentHoldEndsAfterRejoinTimeout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, autoUnseal: true,
		policy: quorumPolicy + "drain {\n  retry_backoff = \"1s\"\n}\n",
		// Longer than the agent takes to see a withdrawn grant (its 5 s
		// recheck) and to wait after it (10 s) plus its delay: otherwise
		// the next grant is stuck before the agent looks at it.
		coordExtra:  "  server_stable_for = \"200ms\"\n  rejoin_timeout = \"20s\"",
		rebootExtra: `    delay = "2s"`})
	servers := c.serverHosts()
	c.start()
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(servers) })
	c.needReboot(servers[0])
	c.waitFor("the grant", 30*time.Second, func() bool { return c.plans()[servers[0]].GrantID != "" })
	if err := c.sim.SetConsulServerHealthy(servers[2], false); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the agent's hold", 30*time.Second, func() bool {
		p := c.plans()[servers[0]]
		return p.Held && strings.Contains(c.waitingOf(servers[0]), "quorum gate")
	})
	var held store.HistoryRecord
	c.waitFor("the attempt ended as held", 30*time.Second, func() bool {
		for _, r := range c.history() {
			if r.Host == servers[0] && r.Outcome == "held" {
				held = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(held.Error, "held the reboot for 20s: quorum gate") {
		t.Errorf("history says %q, want the hold and its reason", held.Error)
	}
	// The history record is written before the plan that ends the attempt.
	c.waitFor("the slot freed", 10*time.Second, func() bool { return !c.plans()[servers[0]].Active() })
	if p := c.plans()[servers[0]]; !strings.Contains(p.LastError, "quorum gate") {
		t.Errorf("after the hold ended: %s, last error %q", p.Phase, p.LastError)
	}
	if err := c.sim.SetConsulServerHealthy(servers[2], true); err != nil {
		t.Fatal(err)
	}
	c.waitFor(servers[0]+" rebooted", 120*time.Second, c.rebootedAll(servers[:1]))
	c.mustHold(invariants.Spec{Reboots: map[string]int{servers[0]: 1, servers[1]: 0, servers[2]: 0}})
	checkServerReboots(t, c, 1)
}

package e2e

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// A server host whose agent cannot resolve its Consul address cannot tell whether
// a Consul server runs there. It is not published as having none: its record
// carries the discovery error, the coordinator holds it even when an operator asks
// for its reboot (status says why), and it reboots only after discovery succeeds.
func TestDiscoveryFailureHoldsHost(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	var host string
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, autoUnseal: true, policy: quorumPolicy,
		coordExtra: `  server_stable_for = "200ms"`,
		agentEnv: func(h string) []string {
			if h != host || !broken.Load() {
				return nil
			}
			// ".invalid" never resolves (RFC 6761): the lookup fails.
			return []string{"CONSUL_HTTP_ADDR=http://consul.invalid:8500"}
		}})
	host = c.serverHosts()[0]
	c.start()
	c.waitFor("the discovery error in the host record", 60*time.Second, func() bool {
		rec, err := c.st.Host(t.Context(), host)
		return err == nil && strings.Contains(rec.DiscoverError, "consul.invalid")
	})
	// The agent detects nothing before it knows its roles; an operator asks.
	c.cli("request", host, "--reason", "new kernel")
	c.waitFor("the host held by the coordinator", 60*time.Second, func() bool {
		p := c.plans()[host]
		return p.Phase == store.PhasePending && strings.Contains(p.Waiting, "server roles unknown")
	})
	if out := c.cli("status"); !strings.Contains(out, "server roles unknown") || !strings.Contains(out, "consul.invalid") {
		t.Errorf("status does not say why the host waits:\n%s", out)
	}
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventHostRebootStart {
			t.Fatalf("a host rebooted while its server roles were unknown: %+v", e)
		}
	}
	// Discovery succeeds once the agent can resolve the address again.
	broken.Store(false)
	c.sup.Kill(host, false)
	c.sup.Restart(host)
	c.waitFor("the host rebooted", 120*time.Second, c.rebootedAll([]string{host}))
	rec, err := c.st.Host(t.Context(), host)
	if err != nil || rec.DiscoverError != "" || len(rec.Servers) != 3 {
		t.Errorf("record after discovery: %+v %v", rec, err)
	}
	others := c.serverHosts()[1:]
	c.mustHold(invariants.Spec{Reboots: map[string]int{host: 1, others[0]: 0, others[1]: 0}})
	checkServerReboots(t, c, 1)
}

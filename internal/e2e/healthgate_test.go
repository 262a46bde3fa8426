package e2e

import (
	"fmt"
	"testing"
	"time"
)

// A PromQL health gate against the real Prometheus: while its expression is
// true no drain starts, with the gate's reason in status and plan; once it is
// false the gate's recheck (not the 30 s resync) lets the drain start. With
// Prometheus gone, the gate fails closed.
func TestPromQLGateHoldsAndReleases(t *testing.T) {
	t.Parallel()
	g := newTestGauge(t, 1)
	prom := startPrometheus(t, g, "")
	promURL := "http://" + prom.addr
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		policy: fmt.Sprintf(`gate "gauge" {
  recheck = %q
  promql {
    query          = "test_gauge > 0"
    prometheus_url = %q
  }
}
`, alertRecheck, promURL)})
	// Prometheus has scraped the gauge once its rule fires.
	c.waitFor("Prometheus to see the gauge", 60*time.Second, func() bool { return promFiring(prom) })
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts[0])
	held := `health gate "gauge": test_gauge > 0 is true: {__name__="test_gauge", instance=`
	c.waitFor("the host held by the gate", 60*time.Second, c.pendingWith(hosts[0], held))
	c.statusAndPlanShow(t, hosts[0], `health gate "gauge": test_gauge > 0 is true`)
	time.Sleep(2 * alertRecheck) // held across rechecks
	if !c.pendingWith(hosts[0], held)() {
		t.Fatalf("the host moved while the gate was closed: %+v", c.plans()[hosts[0]])
	}

	start := time.Now()
	g.v.Store(0)
	c.within("the drain to start once the expression is false", start, c.leftPending(hosts[0]))
	c.waitFor("the host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))

	prom.stop(t)
	c.needReboot(hosts[1])
	c.waitFor("the host held by the unreadable gate", 60*time.Second,
		c.pendingWith(hosts[1], `health gate "gauge": cannot tell (promql): `+promURL+"/api/v1/query: unreachable"))
}

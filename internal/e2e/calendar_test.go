package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// A one-off freeze holds the rollout with its reason, and its end releases
// it without waiting for the production resync; a host whose node opted out
// with `nomad node meta apply rollboot_pause=...` stays held, with its
// reason, while the others reboot, and goes once the key is removed.
func TestFreezeAndNodeOptOut(t *testing.T) {
	t.Parallel()
	freeze := func(end time.Time) string {
		return fmt.Sprintf(`group "all" {
  concurrency = 3
}
freeze "e2e" {
  from = %q
  to   = %q
}`, time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05"), end.UTC().Format("2006-01-02T15:04:05"))
	}
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync, policy: freeze(time.Now().Add(time.Hour))})
	hosts := c.clients()
	optedOut := hosts[2]
	setOptOut := func(v *string) {
		t.Helper()
		h, _ := c.sim.Host(optedOut)
		if _, err := c.client.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{"rollboot_pause": v}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	reason := "benchmark running"
	setOptOut(&reason)
	c.start()
	c.needReboot(hosts...)
	c.waitFor("the hosts held by the freeze", 20*time.Second, func() bool {
		p := c.plans()[hosts[0]]
		return p.Phase == store.PhasePending && strings.Contains(p.Waiting, "frozen until ") && strings.Contains(p.Waiting, " (e2e)")
	})
	// The freeze now ends in 2 s: the pass that sees the new policy holds the
	// hosts still, and the coordinator looks again at the freeze's end, well
	// within the 30 s resync.
	end := time.Now().Add(2 * time.Second).Truncate(time.Second)
	c.applyPolicy(freeze(end))
	c.waitFor("the others rebooted after the freeze", 20*time.Second, c.rebootedAll(hosts[:2]))
	for _, r := range c.history() {
		if started := r.Timeline[store.PhaseDraining]; started.IsZero() || started.Before(end) {
			t.Errorf("%s started draining at %s, during the freeze (until %s)", r.Host, started.Format(time.RFC3339Nano), end.Format(time.RFC3339))
		}
	}
	p := c.plans()[optedOut]
	if p.Phase != store.PhasePending || !strings.Contains(p.Waiting, "its node opted out (node meta rollboot_pause): "+reason) {
		t.Fatalf("%s: phase %s, waiting %q: want pending, held by its node's opt-out", optedOut, p.Phase, p.Waiting)
	}
	if out := c.cli("status"); !strings.Contains(out, reason) {
		t.Errorf("status does not show the opt-out's reason:\n%s", out)
	}
	setOptOut(nil)
	c.waitFor(optedOut+" rebooted once its node no longer opts out", 20*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all", hosts[2]: "all"},
		Concurrency: map[string]int{"all": 3}, EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 1, hosts[2]: 1}})
}

// A freeze is notified when it starts and when it ends, once each, also with
// no host queued: the coordinator runs a pass at each of its bounds, well
// within the production resync.
func TestFreezeNotified(t *testing.T) {
	t.Parallel()
	hook := &webhook{inflight: map[*http.Request]time.Time{}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	const group = `group "all" {
  concurrency = 1
}
`
	c := newCluster(t, clusterOpts{clients: 1, coordinators: 1, resync: productionResync, policy: group,
		coordOnly: notifyBlock("generic://" + strings.TrimPrefix(srv.URL, "http://") + "/hook?disabletls=yes")})
	c.start()
	c.waitFor("the notification ledger's baseline", 30*time.Second, func() bool {
		_, _, err := notify.ReadLedger(context.Background(), c.st)
		return err == nil
	})
	start := time.Now().UTC().Truncate(time.Second).Add(3 * time.Second)
	end := start.Add(2 * time.Second)
	c.applyPolicy(group + fmt.Sprintf(`freeze "e2e" {
  from = %q
  to   = %q
}`, start.Format("2006-01-02T15:04:05"), end.Format("2006-01-02T15:04:05")))

	count := func(kind notify.Kind) (n int) {
		for _, m := range hook.messages() {
			if strings.HasPrefix(m, string(kind)+"|") {
				n++
			}
		}
		return n
	}
	// The resync is 30 s: only the passes at the freeze's bounds notify it
	// this soon.
	c.waitFor("frozen notified", 15*time.Second, func() bool { return count(notify.Frozen) > 0 })
	c.waitFor("freeze_ended notified", 15*time.Second, func() bool { return count(notify.FreezeEnded) > 0 })
	if time.Now().After(end.Add(productionResync)) {
		t.Errorf("the freeze's end was notified only after a resync")
	}
	want := []string{fmt.Sprintf("frozen|||%d", start.UnixNano()), fmt.Sprintf("freeze_ended|||%d", end.UnixNano())}
	if got := hook.messages(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("messages %q, want %q", got, want)
	}
	c.waitFor("the ledger to forget the ended freeze", 15*time.Second, func() bool {
		l, _, err := notify.ReadLedger(context.Background(), c.st)
		_, kept := l.Freezes["e2e"]
		return err == nil && !kept
	})
}

// `rollboot pause -for` ends by itself: the hosts wait while it lasts, status
// says until when, and they reboot once it ends, without a resume and
// without waiting for the production resync.
func TestPauseForExpires(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, resync: productionResync, policy: `group "all" {
  concurrency = 2
}`})
	hosts := c.clients()
	c.start()
	// A pause of a group the policy does not have holds nothing: refused.
	if _, stderr, err := c.runUntilState([]string{"pause", "-group", "nosuch", "-for", "1h", "--address", c.sim.Address()}); err == nil ||
		!strings.Contains(stderr, `the stored policy has no group "nosuch": its groups are default, all`) {
		t.Errorf("pause -group nosuch: %v, %s", err, stderr)
	}
	before := time.Now() // the pause ends 5 s after the command ran, so after before+5s
	out := c.cli("pause", "-for", "5s", "-reason", "e2e window")
	if !strings.Contains(out, "it ends by itself") {
		t.Fatalf("pause -for says %q", out)
	}
	c.needReboot(hosts...)
	c.waitFor("the hosts pending while paused", 20*time.Second, func() bool { return c.plans()[hosts[0]].Phase == store.PhasePending })
	if st := c.cli("status"); !strings.Contains(st, "Rollout paused until") {
		t.Errorf("status does not say until when the pause lasts:\n%s", st)
	}
	c.waitFor("the hosts rebooted after the pause", 20*time.Second, c.rebootedAll(hosts))
	for _, r := range c.history() {
		if started := r.Timeline[store.PhaseDraining]; started.IsZero() || started.Before(before.Add(5*time.Second)) {
			t.Errorf("%s started draining at %s, during the pause (which ended after %s)", r.Host, started.Format(time.RFC3339Nano),
				before.Add(5*time.Second).Format(time.RFC3339Nano))
		}
	}
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all"},
		Concurrency: map[string]int{"all": 2}, EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 1}})
}

// `rollboot request -urgent` skips a closed maintenance window, but not a
// quorum gate: the urgent server host waits while a Consul server is
// unhealthy and reboots once it is healthy, while a host asking without
// -urgent stays held by the window.
func TestUrgentRequestSkipsWindowNotQuorum(t *testing.T) {
	t.Parallel()
	closedAt := (time.Now().UTC().Hour() + 12) % 24
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, autoUnseal: true, resync: productionResync,
		policy: quorumPolicy + fmt.Sprintf(`
window "later" {
  start = "%02d:00"
  end   = "%02d:30"
}`, closedAt, closedAt), coordExtra: `  server_stable_for = "200ms"`})
	c.start()
	servers := c.serverHosts()
	c.waitFor("the agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(servers) })
	if err := c.sim.SetConsulServerHealthy(servers[2], false); err != nil {
		t.Fatal(err)
	}
	c.waitFor("Consul to report the unhealthy server", 30*time.Second, func() bool {
		resp, err := http.Get(c.sim.ConsulAddress() + "/v1/operator/autopilot/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	})
	c.needReboot(servers[1])
	out := c.cli("request", servers[0], "-urgent", "-reason", "CVE fix")
	for _, want := range []string{"skips its group's maintenance windows and freezes", "nor any safety gate", "server quorum"} {
		if !strings.Contains(out, want) {
			t.Errorf("request -urgent says %q, want it to say %q", out, want)
		}
	}
	c.waitFor("the urgent host held by the quorum gate, the other by the window", 30*time.Second, func() bool {
		plans := c.plans()
		return plans[servers[0]].Phase == store.PhasePending && strings.Contains(plans[servers[0]].Waiting, "quorum gate") &&
			plans[servers[1]].Phase == store.PhasePending && strings.Contains(plans[servers[1]].Waiting, "outside the maintenance windows")
	})
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventHostRebootStart {
			t.Fatalf("a server rebooted while a Consul server was unhealthy: %+v", e)
		}
	}
	if st := c.cli("status"); !strings.Contains(st, "urgent: skips windows and freezes") {
		t.Errorf("status does not say the request is urgent:\n%s", st)
	}
	if st := c.cli("status", servers[0]); !strings.Contains(st, "urgent, at ") {
		t.Errorf("status %s does not say the request is urgent:\n%s", servers[0], st)
	}
	if err := c.sim.SetConsulServerHealthy(servers[2], true); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the urgent host rebooted", 60*time.Second, c.rebootedAll(servers[:1]))
	if p := c.plans()[servers[1]]; p.Phase != store.PhasePending || !strings.Contains(p.Waiting, "outside the maintenance windows") {
		t.Errorf("%s without -urgent: phase %s, waiting %q: want pending outside the window", servers[1], p.Phase, p.Waiting)
	}
	c.mustHold(invariants.Spec{Reboots: map[string]int{servers[0]: 1, servers[1]: 0, servers[2]: 0}})
	checkServerReboots(t, c, 1)
}

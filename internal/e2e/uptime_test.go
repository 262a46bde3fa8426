package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/store"
)

// A group's max_uptime makes a host up longer than it (its jitter added) need
// a reboot: `rollboot status` and `rollboot plan` show "uptime Xs > 2s" while
// it waits (the rollout paused), and it reboots with that reason in
// `rollboot history`. A host with a package need as well reboots for the
// package need: the uptime need has the lowest priority.
func TestMaxUptimeReboots(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, policy: `
group "all" {
  filter      = ""
  concurrency = 1
  max_uptime  = "2s"
}
`})
	hosts := c.clients()
	uptimeHost, pkgHost := hosts[0], hosts[1]
	c.needReboot(pkgHost) // before its agent starts: its first record has both needs
	c.cli("pause", "--reason", "look first")
	c.start()

	uptimeReason := regexp.MustCompile(`^uptime \d+(\.\d)?s > 2s$`)
	c.waitFor("both hosts pending", 30*time.Second, func() bool {
		p := c.plans()
		return p[uptimeHost].Phase == store.PhasePending && p[pkgHost].Phase == store.PhasePending
	})
	plans := c.plans()
	if r := plans[uptimeHost].Reason; !uptimeReason.MatchString(r) {
		t.Errorf("%s: plan reason %q, want uptime > 2s", uptimeHost, r)
	}
	if r := plans[pkgHost].Reason; !strings.Contains(r, "reboot-required") {
		t.Errorf("%s: plan reason %q, want its package need (sentinel) rather than its uptime", pkgHost, r)
	}
	var st struct {
		Hosts []struct {
			Host   string `json:"host"`
			Reason string `json:"reason"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(c.cli("status", "-json")), &st); err != nil {
		t.Fatal(err)
	}
	for _, h := range st.Hosts {
		if h.Host == uptimeHost && !uptimeReason.MatchString(h.Reason) {
			t.Errorf("status: %s reason %q, want uptime > 2s", h.Host, h.Reason)
		}
	}
	if out := c.cli("status"); !strings.Contains(out, "reboot: "+plans[uptimeHost].Reason) {
		t.Errorf("rollboot status does not show %q:\n%s", plans[uptimeHost].Reason, out)
	}
	if out := c.cli("plan"); !strings.Contains(out, plans[uptimeHost].Reason) {
		t.Errorf("rollboot plan does not show %q:\n%s", plans[uptimeHost].Reason, out)
	}

	c.cli("resume")
	first := map[string]store.HistoryRecord{}
	c.waitFor("both hosts rebooted", 30*time.Second, func() bool {
		for _, r := range c.history() {
			if _, ok := first[r.Host]; !ok && r.Outcome == "rebooted" {
				first[r.Host] = r
			}
		}
		return len(first) == 2
	})
	if r := first[uptimeHost].Reason; !uptimeReason.MatchString(r) {
		t.Errorf("history: %s rebooted for %q, want uptime > 2s", uptimeHost, r)
	}
	if r := first[pkgHost].Reason; !strings.Contains(r, "reboot-required") {
		t.Errorf("history: %s rebooted for %q, want its package need", pkgHost, r)
	}
	if out := c.cli("history"); !strings.Contains(out, first[uptimeHost].Reason) {
		t.Errorf("rollboot history does not show %q:\n%s", first[uptimeHost].Reason, out)
	}
}

// Trust: a boot time is the host's own claim. Another holder of the agent
// token who writes an old boot time into a host's record gets that host
// granted for its "uptime", and the host's agent refuses the grant: the boot
// time the plan was reckoned from is not the one it read for its own boot.
func TestTrustForgedBootTimeRebootsNobody(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 2, policy: `group "all" {
  concurrency = 1
  max_uptime  = "1h"
}`})
	hosts := c.clients()
	victim := hosts[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	forged := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	forge(ctx, &wg, ag, victim, func(r *store.HostRecord) { r.BootedAt = forged })
	c.waitFor("the grant refused by the victim's agent", 30*time.Second, func() bool {
		for _, h := range c.history() {
			if h.Host == victim && h.Outcome == "failed" && strings.Contains(h.Error, "does not see") &&
				strings.HasPrefix(h.Reason, "uptime ") {
				return true
			}
		}
		return false
	})
	cancel()
	wg.Wait()
	c.waitFor(victim+" eligible and idle again", 30*time.Second, func() bool {
		n, err := c.sim.Node(victim)
		p := c.plans()[victim]
		return err == nil && n.SchedulingEligibility == api.NodeSchedulingEligible && n.DrainStrategy == nil &&
			(p.Phase == store.PhaseIdle || p.Phase == store.PhaseBackoff)
	})
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{victim: 0, hosts[1]: 0}})
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// A group whose reboots start failing halts itself after its failure
// budget's max_failures: its other hosts stay pending with the halt's reason
// (status's banner, plan), the halted notification is sent once, nothing
// moves, until `rollboot resume -group` lifts it; then the group goes on.
// Production resync: the halt and the resume act through the watches.
func TestFailureBudgetHaltsGroup(t *testing.T) {
	t.Parallel()
	fail := filepath.Join(t.TempDir(), "reboots-fail")
	if err := os.WriteFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hook := &webhook{inflight: map[*http.Request]time.Time{}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	script := fmt.Sprintf(`if [ -e %q ]; then echo "reboot: injected failure" >&2; exit 1; fi; exec {{bin}} sim-ctl reboot --address {{sim}} {{host}}`, fail)
	c := newCluster(t, clusterOpts{clients: 4, coordinators: 1, resync: productionResync,
		rebootCommand: []string{"sh", "-c", script},
		coordOnly:     notifyBlock("generic://" + strings.TrimPrefix(srv.URL, "http://") + "/hook?disabletls=yes"),
		policy: `group "web" {
  filter      = ""
  concurrency = 1
  failure_budget {
    max_failures = 2
    window       = "1h"
    count        = ["reboot_failed"]
  }
}
drain {
  retry_backoff     = "1h"
  retry_max_backoff = "1h"
}
`})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.waitFor("the notification ledger's baseline", 30*time.Second, func() bool {
		_, _, err := notify.ReadLedger(context.Background(), c.st)
		return err == nil
	})
	c.needReboot(hosts...)

	// The first two hosts granted fail their reboot, one after the other; the
	// second failure halts the group before its slot is handed out again.
	failed := map[string]bool{}
	c.waitFor("two failed reboots", 60*time.Second, func() bool {
		for _, r := range c.history() {
			if r.Outcome == "failed" {
				failed[r.Host] = true
			}
		}
		return len(failed) == 2
	})
	var rest []string
	for _, h := range hosts {
		if !failed[h] {
			rest = append(rest, h)
		}
	}
	halted := `halted: group "web" halted at `
	c.waitFor("the other hosts held by the halt", 30*time.Second, func() bool {
		return c.pendingWith(rest[0], halted)() && c.pendingWith(rest[1], halted)()
	})
	c.statusAndPlanShow(t, rest[0], "2 failed cycles (")
	if out := c.cli("status"); !strings.HasPrefix(out, `HALTED: group "web" halted at `) {
		t.Errorf("status does not begin with the halt:\n%s", out)
	}
	// The failures are stored before the halt's hosts could go, and nothing
	// lifts the halt but a resume.
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	for _, h := range rest {
		if !c.pendingWith(h, halted)() || c.drainStarted(h) {
			t.Fatalf("%s moved while the group was halted: %+v", h, c.plans()[h])
		}
	}

	halts := func() (n int) {
		for _, m := range hook.messages() {
			if strings.HasPrefix(m, "halted|") {
				n++
			}
		}
		return n
	}
	c.waitFor("the halted notification", 30*time.Second, func() bool { return halts() > 0 })
	if out := c.cli("resume", "-group", "web"); !strings.Contains(out, `The halt of group "web" is lifted`) {
		t.Errorf("resume said %q", out)
	}
	c.waitFor("the held hosts rebooted after the resume", 90*time.Second, c.rebootedAll(rest))
	hs, _, err := c.st.Halts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hs.Halts["web"]; ok || hs.Resumes["web"].By == "" || len(hs.Log) != 2 || hs.Log[1].Event != "resumed" {
		t.Errorf("halt state after the resume: %+v", hs)
	}
	if out := c.cli("history"); !strings.Contains(out, `group "web"  halted`) || !strings.Contains(out, `group "web"  resumed`) {
		t.Errorf("history does not show the halt and the resume:\n%s", out)
	}
	if n := halts(); n != 1 {
		t.Errorf("%d halted notifications, want 1: %q", n, hook.messages())
	}
	reboots := map[string]int{}
	for _, h := range hosts {
		reboots[h] = 0
	}
	for _, h := range rest {
		reboots[h] = 1
	}
	for h := range failed {
		if p := c.plans()[h]; p.Phase != store.PhaseBackoff {
			t.Errorf("%s, whose reboot failed, is %s, not backing off", h, p.Phase)
		}
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: reboots,
		Group: map[string]string{hosts[0]: "web", hosts[1]: "web", hosts[2]: "web", hosts[3]: "web"}, Concurrency: map[string]int{"web": 1}})
}

// The rollout's max_out holds all groups together, on top of each group's
// concurrency: two groups whose own budgets would let both hosts out at once
// reboot one host at a time (the invariant checker counts them as one group
// of concurrency 1), and the host held says which budget holds it.
func TestRolloutMaxOutAcrossGroups(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		policy: `group "a" {
  filter      = "Name == \"client-1\""
  concurrency = 1
}
group "b" {
  filter      = ""
  concurrency = 1
}
rollout {
  max_out = 1
}
`})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts...)
	c.waitFor("a host held by the rollout's max_out", 60*time.Second, func() bool {
		for _, h := range hosts {
			if c.pendingWith(h, "rollout max_out: 1 of 1 hosts out")() {
				return true
			}
		}
		return false
	})
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	all := map[string]string{}
	for _, h := range hosts {
		all[h] = "rollout"
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1), Group: all, Concurrency: map[string]int{"rollout": 1}})
}

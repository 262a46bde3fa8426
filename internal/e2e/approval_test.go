package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/store"
)

// awaitingHost is the host whose plan awaits approval, with its reason ("" when
// none does).
func (c *cluster) awaitingHost() (string, string) {
	for name, p := range c.plans() {
		if p.Phase == store.PhasePending && p.WaitingKind == "awaiting_approval" {
			return name, p.Waiting
		}
	}
	return "", ""
}

// noneDrained fails the test if a drain of any of hosts started.
func (c *cluster) noneDrained(hosts []string, why string) {
	c.t.Helper()
	for _, h := range hosts {
		if c.drainStarted(h) {
			c.t.Fatalf("%s was drained %s", h, why)
		}
	}
}

// approvedBy is who approved each host's rebooted cycle, as the history says.
func (c *cluster) approvedBy() map[string]string {
	out := map[string]string{}
	for _, r := range c.history() {
		if r.Outcome == "rebooted" {
			out[r.Host] = r.ApprovedBy
		}
	}
	return out
}

// A group with approval = "manual": the host whose turn comes awaits, shown in
// status and plan, and no drain starts (the hosts behind it wait for its
// slot) until `rollboot approve HOST`; its approval is consumed by its cycle,
// and `rollboot approve -group` lets the rest of the line go.
func TestApprovalManual(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, resync: productionResync, policy: `group "all" {
  approval = "manual"
}`})
	hosts := c.clients()
	c.start()
	c.needReboot(hosts...)
	var first string
	c.waitFor("a host to await approval", 30*time.Second, func() bool { first, _ = c.awaitingHost(); return first != "" })
	c.waitFor("the other hosts pending", 30*time.Second, func() bool {
		n := 0
		for _, p := range c.plans() {
			if p.Phase == store.PhasePending {
				n++
			}
		}
		return n == len(hosts)
	})
	out := c.cli("status")
	for _, want := range []string{first + " ", "awaiting_approval", "rollboot approve " + first, "awaiting approval: " + first, "after " + first} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if kind, reason := c.planWait(first); kind != "awaiting_approval" || !strings.Contains(reason, "awaiting approval") {
		t.Errorf("plan shows %s as %s: %q", first, kind, reason)
	}
	c.noneDrained(hosts, "with no approval given")

	if out := c.cli("approve", first); !strings.Contains(out, first+" may drain") {
		t.Fatalf("approve: %s", out)
	}
	c.waitFor(first+" rebooted once approved", 60*time.Second, c.rebootedAll([]string{first}))
	var second string
	c.waitFor("the next host to await approval", 30*time.Second, func() bool { second, _ = c.awaitingHost(); return second != "" })
	rest := slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return h == first })
	c.noneDrained(rest, "before the group was approved")
	ctl, err := c.st.Control(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := ctl.Approvals[first]; ok {
		t.Errorf("the approval of %s was not consumed by its cycle: %+v", first, a)
	}

	out = c.cli("approve", "-group", "all")
	if !strings.Contains(out, "2 host(s) of group \"all\" approved") {
		t.Fatalf("approve -group: %s", out)
	}
	c.waitFor("the rest of the group rebooted", 60*time.Second, c.rebootedAll(rest))
	for h, by := range c.approvedBy() {
		if by == "" {
			t.Errorf("the history does not say who approved %s", h)
		}
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1),
		Group: groupOf(hosts, "all"), Concurrency: map[string]int{"all": 1}})
}

// groupOf maps each of hosts to group.
func groupOf(hosts []string, group string) map[string]string {
	m := map[string]string{}
	for _, h := range hosts {
		m[h] = group
	}
	return m
}

// approvalHook is the approval webhook of the test: it answers as mode says
// and records what it was sent.
type approvalHook struct {
	srv   *httptest.Server
	mode  atomic.Value // "refuse", "hang" or "approve"
	mu    sync.Mutex
	asked []map[string]string
	auth  []string
}

func newApprovalHook(t *testing.T) *approvalHook {
	h := &approvalHook{}
	h.mode.Store("refuse")
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		h.mu.Lock()
		h.asked, h.auth = append(h.asked, body), append(h.auth, r.Header.Get("X-Approval"))
		h.mu.Unlock()
		switch h.mode.Load() {
		case "approve":
			fmt.Fprintln(w, "ok")
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintln(w, "change freeze until monday")
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// A group with approval = "webhook": a refusal and a webhook that does not
// answer in time each hold the host whose turn came, with the answer shown
// and no drain; once the webhook answers 2xx the hosts reboot, each asked as
// its turn comes, and the history records the answer. The secret is sent in
// its header and shown in no log.
func TestApprovalWebhook(t *testing.T) {
	t.Parallel()
	const secret = "approval-secret-5d0a7c"
	hook := newApprovalHook(t)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "approval-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync, policy: fmt.Sprintf(`group "all" {
  approval = "webhook"
}
approval {
  webhook     = %q
  timeout     = "1s"
  recheck     = "2s"
  auth_header = "X-Approval"
  auth_file   = %q
}`, hook.srv.URL+"/approve", secretFile)})
	hosts := c.clients()
	c.start()
	c.needReboot(hosts...)
	var first string
	c.waitFor("the webhook's refusal shown", 30*time.Second, func() bool {
		h, why := c.awaitingHost()
		first = h
		return strings.Contains(why, "the approval webhook answered HTTP 403: change freeze until monday")
	})
	if out := c.cli("status"); !strings.Contains(out, "HTTP 403: change freeze") {
		t.Errorf("status does not show the webhook's answer:\n%s", out)
	}
	c.noneDrained(hosts, "though the webhook refused")

	hook.mode.Store("hang")
	c.waitFor("the webhook's silence shown", 30*time.Second, func() bool {
		_, why := c.awaitingHost()
		return strings.Contains(why, "no answer within 1s")
	})
	c.noneDrained(hosts, "though the webhook did not answer")

	hook.mode.Store("approve")
	c.waitFor("every host rebooted once the webhook approves", 60*time.Second, c.rebootedAll(hosts))
	for _, h := range hosts {
		if by := c.approvedBy()[h]; by != "approval webhook: HTTP 200: ok" {
			t.Errorf("history of %s: approved by %q", h, by)
		}
	}
	hook.mu.Lock()
	asked, auth := slices.Clone(hook.asked), slices.Clone(hook.auth)
	hook.mu.Unlock()
	seen := map[string]bool{}
	for i, a := range asked {
		seen[a["host"]] = true
		if a["group"] != "all" || a["reason"] == "" || auth[i] != secret {
			t.Errorf("request %d: %v with header %q", i, a, auth[i])
		}
	}
	if !seen[first] || len(seen) != len(hosts) {
		t.Errorf("the webhook was asked about %v, want every host", seen)
	}
	for _, name := range []string{"coordinator-1"} {
		if strings.Contains(c.logText(name), secret) {
			t.Errorf("%s's log shows the webhook's secret", name)
		}
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1),
		Group: groupOf(hosts, "all"), Concurrency: map[string]int{"all": 1}})
}

// A host nobody approves keeps its group's slot only for approval.hold_slot:
// then it steps aside, still awaiting, and the next host in line has the turn;
// approved, that one reboots while the first still waits.
func TestApprovalHoldSlotEnds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync, policy: `group "all" {
  approval = "manual"
}
approval {
  hold_slot = "2s"
}`})
	hosts := c.clients()
	c.start()
	c.needReboot(hosts...)
	var first string
	c.waitFor("a host to await approval", 30*time.Second, func() bool { first, _ = c.awaitingHost(); return first != "" })
	second := hosts[0]
	if second == first {
		second = hosts[1]
	}
	start := time.Now()
	c.within(second+" awaiting too once "+first+" stepped aside", start, func() bool {
		p := c.plans()[second]
		return p.WaitingKind == "awaiting_approval"
	})
	// The pass stores both plans side by side: either may show first.
	c.waitFor(first+" saying it stepped aside", 10*time.Second, func() bool {
		return strings.Contains(c.plans()[first].Waiting, "let the next host in line have its group's slot")
	})
	c.cli("approve", second)
	c.waitFor(second+" rebooted", 60*time.Second, c.rebootedAll([]string{second}))
	c.noneDrained([]string{first}, "though nobody approved it")
	if p := c.plans()[first]; p.Phase != store.PhasePending || p.WaitingKind != "awaiting_approval" {
		t.Errorf("%s after the other's reboot: %s, %q", first, p.Phase, p.Waiting)
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{first: 0, second: 1},
		Group: groupOf(hosts, "all"), Concurrency: map[string]int{"all": 1}})
}

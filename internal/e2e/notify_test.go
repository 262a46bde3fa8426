package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// webhook is a notification target. It holds each request a while, so that a
// test can act while a send is under way, and takes a message only once it
// answered it: a sender killed during the request delivered nothing.
type webhook struct {
	hold time.Duration

	mu       sync.Mutex
	got      []string
	inflight map[*http.Request]time.Time
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.inflight[r] = time.Now()
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.inflight, r)
		w.mu.Unlock()
	}()
	select {
	case <-time.After(w.hold):
	case <-r.Context().Done():
		return // the sender is gone
	}
	rw.WriteHeader(http.StatusNoContent)
	w.mu.Lock()
	w.got = append(w.got, string(body))
	w.mu.Unlock()
}

func (w *webhook) messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// youngInflight reports whether a request has been held for less than half the
// hold: killing its sender now surely ends it before it is answered.
func (w *webhook) youngInflight() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, since := range w.inflight {
		if time.Since(since) < w.hold/2 {
			return true
		}
	}
	return false
}

// parseMessage reads a message of the test's templates: kind|host|grant|at.
func parseMessage(m string) (notify.Event, error) {
	f := strings.Split(m, "|")
	if len(f) != 4 {
		return notify.Event{}, fmt.Errorf("message %q: want kind|host|grant|at", m)
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return notify.Event{}, err
	}
	return notify.Event{Kind: notify.Kind(f[0]), Host: f[1], Grant: f[2], At: time.Unix(0, n).UTC()}, nil
}

// notifyBlock is the coordinators' notify block: every event, each as
// kind|host|grant|at, to url.
func notifyBlock(url string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "notify {\n  urls = [%q]\n  timeout = \"20s\"\n", url)
	for _, k := range notify.Kinds {
		fmt.Fprintf(&b, "  message %q {\n    text = \"{{.Kind}}|{{.Host}}|{{.Grant}}|{{.At.UnixNano}}\"\n  }\n", k)
	}
	b.WriteString("}\n")
	return b.String()
}

// A rollout with a pause and a resume, whose leader is killed while it sends a
// notification: every event is sent once, none twice and none lost, from the
// leader only; the webhook URL's credentials show in no log. The new leader
// also publishes every node's state as dynamic node metadata.
func TestNotificationsAcrossFailover(t *testing.T) {
	t.Parallel()
	hook := &webhook{hold: 800 * time.Millisecond, inflight: map[*http.Request]time.Time{}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	url := "generic://hookuser:hookpa55@" + strings.TrimPrefix(srv.URL, "http://") + "/hook/s3cr3t-path?disabletls=yes"
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 2, migrateTime: 200 * time.Millisecond, jobs: slowDrains,
		coordOnly: notifyBlock(url),
		policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	c.waitFor("a coordinator to lead", 30*time.Second, func() bool { return c.leader() != "" })
	ctx := context.Background()
	ledger := func() (notify.Ledger, error) {
		l, _, err := notify.ReadLedger(ctx, c.st)
		return l, err
	}
	c.waitFor("the notification ledger's baseline", 30*time.Second, func() bool { _, err := ledger(); return err == nil })

	setPause := func(paused bool) {
		t.Helper()
		_, err := c.st.UpdateControl(ctx, func(ctl *store.Control) error {
			ctl.Paused, ctl.PauseReason, ctl.PausedAt = paused, "", time.Time{}
			if paused {
				ctl.PauseReason, ctl.PausedAt = "change freeze", time.Now().UTC()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setPause(true)
	c.waitFor("paused notified", 30*time.Second, func() bool { return len(hook.messages()) == 1 })
	setPause(false)
	c.waitFor("resumed notified", 30*time.Second, func() bool { return len(hook.messages()) == 2 })

	c.needReboot(hosts...)
	// Kill the leader while a send is under way and every message delivered so
	// far is in the ledger: the message in flight is not delivered, and must
	// come from the next leader, once.
	c.waitFor("a send under way mid-rollout", 90*time.Second, func() bool {
		got := hook.messages()
		if len(got) < 4 || !hook.youngInflight() {
			return false
		}
		l, err := ledger()
		if err != nil {
			return false
		}
		for _, m := range got {
			if e, err := parseMessage(m); err != nil || !l.Sent(e) {
				return false
			}
		}
		return true
	})
	killed := c.leader()
	c.killCoordinator(killed)
	t.Logf("killed %s with %d messages delivered and one under way", killed, len(hook.messages()))
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	want := 2 + 3*len(hosts) // paused, resumed; each host's drain, reboot and return
	c.waitFor("every notification", 60*time.Second, func() bool { return len(hook.messages()) >= want })
	time.Sleep(2 * hook.hold) // a duplicate would come now

	count := map[string]int{}
	for _, m := range hook.messages() {
		e, err := parseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		count[string(e.Kind)+" "+e.Host]++
	}
	for _, h := range append([]string{""}, hosts...) {
		kinds := []notify.Kind{notify.DrainStarted, notify.Rebooting, notify.BackInService}
		if h == "" {
			kinds = []notify.Kind{notify.Paused, notify.Resumed}
		}
		for _, k := range kinds {
			if n := count[string(k)+" "+h]; n != 1 {
				t.Errorf("%s of %q sent %d times, want once", k, h, n)
			}
		}
	}
	if got := len(hook.messages()); got != want {
		t.Errorf("%d messages, want %d: %q", got, want, hook.messages())
	}
	c.mu.Lock()
	for name, b := range c.logs {
		for _, secret := range []string{"hookpa55", "s3cr3t-path", "hookuser"} {
			if strings.Contains(b.String(), secret) {
				t.Errorf("the log of %s shows %q", name, secret)
			}
		}
		if strings.HasPrefix(name, "coordinator") && name != killed && !strings.Contains(b.String(), "notification sent") {
			t.Errorf("the log of %s shows no notification sent", name)
		}
	}
	c.mu.Unlock()
	// The leader published each host's state as dynamic node metadata: every
	// node idle, needing nothing, with the time of its reboot.
	c.waitFor("every node's metadata", 30*time.Second, func() bool {
		nodes, _, err := c.client.Nodes().List(&api.QueryOptions{Filter: `Meta.rollboot_phase == "idle" and Meta.rollboot_reboot_required == "false" and Meta.rollboot_last_reboot != ""`})
		return err == nil && len(nodes) == len(hosts)
	})
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all", hosts[2]: "all"},
		Concurrency: map[string]int{"all": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

// A reboot command that fails on each host's first attempt: that grant's drain,
// reboot (when a pass saw it begin) and failure are notified once each, then the
// retry's drain, reboot and return under a new grant.
func TestNotificationsOfAFailedAttempt(t *testing.T) {
	t.Parallel()
	hook := &webhook{hold: 10 * time.Millisecond, inflight: map[*http.Request]time.Time{}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1,
		coordOnly: notifyBlock("generic://" + strings.TrimPrefix(srv.URL, "http://") + "/hook?disabletls=yes"),
		rebootCommand: failFirst("reboot-count", 7, "reboot: access denied (injected)",
			`exec {{bin}} sim-ctl reboot --address {{sim}} {{host}}`),
		policy: `drain {
  retry_backoff = "300ms"
}
group "all" {
  concurrency = 2
}`})
	c.start()
	hosts := c.clients()
	c.waitFor("the notification ledger's baseline", 30*time.Second, func() bool {
		_, _, err := notify.ReadLedger(context.Background(), c.st)
		return err == nil
	})
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	// Per host: drain, failure; drain, reboot, return; and the first attempt's
	// "rebooting" when a pass saw the agent start that reboot before it failed
	// (a reboot command that fails at once may be reported first: the
	// coordinator never stores the phase, and there is no event to send).
	least := 5 * len(hosts)
	for deadline := time.Now().Add(60 * time.Second); len(hook.messages()) < least; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of at least %d notifications after 1m0s: %q", len(hook.messages()), least, hook.messages())
		}
	}
	time.Sleep(time.Second) // a late one, or a duplicate, would come now

	grants := map[string]map[notify.Kind][]string{}
	seen := map[string]bool{}
	for _, m := range hook.messages() {
		e, err := parseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if key := string(e.Kind) + "|" + e.Host + "|" + e.Grant; seen[key] {
			t.Errorf("sent twice: %s", key)
		} else {
			seen[key] = true
		}
		if grants[e.Host] == nil {
			grants[e.Host] = map[notify.Kind][]string{}
		}
		grants[e.Host][e.Kind] = append(grants[e.Host][e.Kind], e.Grant)
	}
	for _, h := range hosts {
		g := grants[h]
		reb := g[notify.Rebooting]
		if len(g[notify.DrainStarted]) != 2 || len(g[notify.RebootFailed]) != 1 || len(reb) < 1 || len(reb) > 2 ||
			len(g[notify.BackInService]) != 1 {
			t.Errorf("%s: events %v, want two drains, one failure, a reboot of the retry, one return", h, g)
			continue
		}
		first, retry := g[notify.DrainStarted][0], g[notify.DrainStarted][1]
		if first == retry || g[notify.RebootFailed][0] != first || reb[len(reb)-1] != retry || (len(reb) == 2 && reb[0] != first) {
			t.Errorf("%s: grants %v: the failure must be the first grant's, a reboot the retry's", h, g)
		}
	}
}

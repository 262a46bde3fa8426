package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// amSilenceView is the part of Alertmanager's gettableSilence the test reads.
type amSilenceView struct {
	ID        string    `json:"id"`
	CreatedBy string    `json:"createdBy"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	Matchers  []struct {
		Name    string `json:"name"`
		Value   string `json:"value"`
		IsRegex bool   `json:"isRegex"`
		IsEqual bool   `json:"isEqual"`
	} `json:"matchers"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

// rollbootSilences returns Alertmanager's silences by rollboot whose matchers
// name host, expired ones included.
func rollbootSilences(am *promProc, host string) []amSilenceView {
	var all []amSilenceView
	if !promGetJSON("http://"+am.addr+"/api/v2/silences", &all) {
		return nil
	}
	var out []amSilenceView
	for _, s := range all {
		for _, m := range s.Matchers {
			if s.CreatedBy == "rollboot" && m.Name == "instance" && strings.Contains(m.Value, host) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// activeSilence reports whether rollboot keeps an active silence for host.
func activeSilence(am *promProc, host string) bool {
	for _, s := range rollbootSilences(am, host) {
		if s.Status.State == "active" {
			return true
		}
	}
	return false
}

// amPostAlerts sends Alertmanager firing alerts named names, each with the
// label instance, as Prometheus would.
func amPostAlerts(t *testing.T, am *promProc, instance string, names ...string) {
	t.Helper()
	var alerts []map[string]any
	for _, n := range names {
		alerts = append(alerts, map[string]any{"labels": map[string]string{"alertname": n, "instance": instance},
			"startsAt": time.Now().UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}
	body, _ := json.Marshal(alerts)
	resp, err := http.Post("http://"+am.addr+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post alerts: %s", resp.Status)
	}
}

// amAlertState returns the state of the alert named name with label instance
// ("" when Alertmanager has none).
func amAlertState(am *promProc, name, instance string) string {
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if !promGetJSON("http://"+am.addr+"/api/v2/alerts", &alerts) {
		return ""
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == name && a.Labels["instance"] == instance {
			return a.Status.State
		}
	}
	return ""
}

// A host gets a silence in the real Alertmanager exactly while it is out: made
// when its drain starts, kept while it reboots, ended its tail after it is
// back; it silences the host's alerts but never rollboot's own. A host that
// turns stuck has its silence ended at once, so its failure pages.
func TestSilenceWhileHostOut(t *testing.T) {
	t.Parallel()
	am := startAlertmanager(t)
	const tail = 6 * time.Second
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, resync: productionResync, coordExtra: `  rejoin_timeout = "2s"`,
		policy: fmt.Sprintf(`alerts {
  alertmanager_url = %q
}
silence {
  matchers = ["instance=~\"{{.HostRegex}}(:[0-9]+)?\""]
  tail     = %q
}
group "all" {
  concurrency = 2
}
`, "http://"+am.addr, tail)})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	ok, stuck := hosts[0], hosts[1]
	if err := c.sim.SetBootBlocked(stuck, true); err != nil {
		t.Fatal(err)
	}
	c.needReboot(ok)
	c.needReboot(stuck)

	c.waitFor("a silence for the host out", 30*time.Second, func() bool { return activeSilence(am, ok) })
	// Its alerts fire once it is out (before, the alert gate of the same
	// Alertmanager would hold its drain).
	amPostAlerts(t, am, ok+":9100", "NodeDown", "RollbootHostStuck")
	if p := c.plans()[ok]; p.Phase == store.PhasePending || p.Phase == store.PhaseIdle || p.Phase == "" {
		t.Errorf("a silence exists for %s in phase %q", ok, p.Phase)
	}
	c.waitFor("the host's alert silenced", 20*time.Second, func() bool { return amAlertState(am, "NodeDown", ok+":9100") == "suppressed" })
	if s := amAlertState(am, "RollbootHostStuck", ok+":9100"); s != "active" {
		t.Errorf("rollboot's own alert is %q, want active: a silence must never cover it", s)
	}
	if out := c.cli("status"); !strings.Contains(out, "Silences") {
		t.Errorf("rollboot status shows no silences while hosts are out:\n%s", out)
	}

	// Stuck: the silence is ended at once, long before its duration.
	c.waitFor("the other host stuck", 60*time.Second, func() bool { return c.plans()[stuck].Phase == store.PhaseStuck })
	stuckAt := c.plans()[stuck].PhaseSince
	c.waitFor("the stuck host's silence ended", 30*time.Second, func() bool { return !activeSilence(am, stuck) })
	made := rollbootSilences(am, stuck)
	if len(made) == 0 {
		t.Fatalf("no silence was made for %s while it was out", stuck)
	}
	for _, s := range made {
		if s.EndsAt.After(stuckAt.Add(15 * time.Second)) {
			t.Errorf("the silence of the stuck host ends at %v, long after it turned stuck at %v: it was extended", s.EndsAt, stuckAt)
		}
	}

	// Back: the silence lasts its tail after the host is back, then ends.
	c.waitFor("the host rebooted", 60*time.Second, c.rebootedAll([]string{ok}))
	c.waitFor("the host's silence ended after its tail", 60*time.Second, func() bool { return !activeSilence(am, ok) })
	var cycle store.HistoryRecord
	for _, r := range c.history() {
		if r.Host == ok && r.Outcome == "rebooted" {
			cycle = r
		}
	}
	drained, back := cycle.Timeline[store.PhaseDraining], cycle.Finished
	t.Logf("%s out from %s to %s", ok, drained.Format(time.StampMilli), back.Format(time.StampMilli))
	for _, s := range rollbootSilences(am, ok) {
		if s.StartsAt.Before(drained.Add(-time.Second)) {
			t.Errorf("the silence starts at %v, before the drain at %v", s.StartsAt, drained)
		}
		if s.EndsAt.Before(back.Add(tail-time.Second)) || s.EndsAt.After(back.Add(tail+10*time.Second)) {
			t.Errorf("the silence ends at %v; the host was back at %v, with a tail of %s", s.EndsAt, back, tail)
		}
	}
	if s := amAlertState(am, "NodeDown", ok+":9100"); s != "active" {
		t.Errorf("the host's alert is %q after its silence ended, want active", s)
	}
}

// A silence Alertmanager refuses never holds the rollout: the host reboots,
// and `rollboot status` shows the failed write. Alertmanager sits behind a
// proxy that refuses every silence and passes the rest (the alert gate's
// reads) through.
func TestSilenceFailureHoldsNothing(t *testing.T) {
	t.Parallel()
	am := startAlertmanager(t)
	target, _ := url.Parse("http://" + am.addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v2/silences" {
			http.Error(w, "silences are read-only here", http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		policy: fmt.Sprintf(`alerts {
  alertmanager_url = %q
}
silence {
  matchers = ["instance=~\"{{.HostRegex}}(:[0-9]+)?\""]
}
`, front.URL)})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts[0])
	c.waitFor("the host rebooted despite the refused silence", 60*time.Second, c.rebootedAll(hosts[:1]))
	if s := rollbootSilences(am, hosts[0]); len(s) != 0 {
		t.Fatalf("silences exist behind the refusing proxy: %+v", s)
	}
	want := "create: POST " + front.URL + "/api/v2/silences: HTTP 500: silences are read-only here"
	c.waitFor("status to show the failed silence write", 30*time.Second, func() bool {
		return strings.Contains(c.cli("status"), want)
	})
}

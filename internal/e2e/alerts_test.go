package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// The alert gate against a real Prometheus and a real Alertmanager (Debian's
// prometheus and prometheus-alertmanager). Prometheus scrapes a gauge the test
// sets, every second, and its rule fires while the gauge is above 0.

// testAlertName is the test rule's alert.
const testAlertName = "TestGaugeHigh"

// alertRecheck is the policy's alerts.recheck in these tests: with the
// production resync (30 s), only the recheck timer can release a held rollout
// within half of it.
const alertRecheck = 2 * time.Second

// promBinary returns the path of a program of the prometheus packages; it skips the
// test when it is missing, unless ROLLBOOT_REQUIRE_PROMETHEUS=1 (CI).
func promBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("ROLLBOOT_REQUIRE_PROMETHEUS") == "1" {
			t.Fatalf("%s not installed (Debian package %s) and ROLLBOOT_REQUIRE_PROMETHEUS=1", name, pkg)
		}
		t.Skipf("%s not installed (Debian package %s)", name, pkg)
	}
	return p
}

// testGauge serves /metrics with test_gauge at the value the test sets.
type testGauge struct {
	v   atomic.Int64
	srv *httptest.Server
}

func newTestGauge(t *testing.T, v int64) *testGauge {
	g := &testGauge{}
	g.v.Store(v)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP test_gauge Set by the test.\n# TYPE test_gauge gauge\ntest_gauge %d\n", g.v.Load())
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// promProc is a process the test started (Prometheus, Alertmanager).
type promProc struct {
	name string
	cmd  *exec.Cmd
	addr string
	out  syncbuf.Buffer // its output, read while it writes
}

// startPromProc runs bin with args, waits until http://addr/-/ready answers, and
// stops it when the test ends.
func startPromProc(t *testing.T, name, bin, addr string, args ...string) *promProc {
	t.Helper()
	d := &promProc{name: name, addr: addr, cmd: exec.Command(bin, args...)}
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("---- %s ----\n%s", name, promTail(d.out.String(), 4000))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", name, promTail(d.out.String(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s:\n%s", name, promTail(d.out.String(), 4000))
		}
	}
}

// stop ends the process (SIGTERM) and waits until nothing answers at its address.
func (d *promProc) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", d.addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers after SIGTERM", d.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func promTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// startPrometheus runs Prometheus scraping g every second with the rule
// `test_gauge > 0` (for: 0s) evaluated every second, sending its alerts to
// alertmanager (host:port) when given.
func startPrometheus(t *testing.T, g *testGauge, alertmanager string) *promProc {
	t.Helper()
	bin := promBinary(t, "prometheus", "prometheus")
	dir := t.TempDir()
	rules := fmt.Sprintf(`groups:
  - name: e2e
    interval: 1s
    rules:
      - alert: %s
        expr: test_gauge > 0
        for: 0s
`, testAlertName)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: e2e
    static_configs:
      - targets: [%q]
`, filepath.Join(dir, "rules.yml"), strings.TrimPrefix(g.srv.URL, "http://"))
	if alertmanager != "" {
		cfg += fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", alertmanager)
	}
	for name, content := range map[string]string{"rules.yml": rules, "prometheus.yml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	return startPromProc(t, "prometheus", bin, addr,
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--rules.alert.resend-delay=1s", "--log.level=warn")
}

// startAlertmanager runs an Alertmanager on its own (no cluster peers), whose
// alerts go to a receiver that sends nothing.
func startAlertmanager(t *testing.T) *promProc {
	t.Helper()
	bin := promBinary(t, "prometheus-alertmanager", "prometheus-alertmanager")
	dir := t.TempDir()
	cfg := "route:\n  receiver: none\n  group_wait: 1s\nreceivers:\n  - name: none\n"
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	return startPromProc(t, "alertmanager", bin, addr,
		"--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
}

// promGetJSON decodes the answer of GET url into v; false when it cannot.
func promGetJSON(url string, v any) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}

// promFiring reports whether Prometheus has the test's alert firing.
func promFiring(prom *promProc) bool {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if !promGetJSON("http://"+prom.addr+"/api/v1/alerts", &r) {
		return false
	}
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == testAlertName && a.State == "firing" {
			return true
		}
	}
	return false
}

// amState returns the state of the test's alert in Alertmanager ("" when it
// has none).
func amState(am *promProc) string {
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
		if a.Labels["alertname"] == testAlertName {
			return a.Status.State
		}
	}
	return ""
}

// amSilence silences the test's alert through Alertmanager's v2 API.
func amSilence(t *testing.T, am *promProc) {
	t.Helper()
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"matchers":  []map[string]any{{"name": "alertname", "value": testAlertName, "isRegex": false, "isEqual": true}},
		"startsAt":  now.Format(time.RFC3339),
		"endsAt":    now.Add(time.Hour).Format(time.RFC3339),
		"createdBy": "e2e", "comment": "maintenance",
	})
	resp, err := http.Post("http://"+am.addr+"/api/v2/silences", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("create a silence: %s: %s", resp.Status, b.String())
	}
}

// pendingWith returns a condition: host is pending, and its stored reason holds
// want.
func (c *cluster) pendingWith(host, want string) func() bool {
	return func() bool {
		p := c.plans()[host]
		return p.Phase == store.PhasePending && strings.Contains(p.Waiting, want)
	}
}

// leftPending returns a condition: host left pending (its drain started).
func (c *cluster) leftPending(host string) func() bool {
	return func() bool {
		p, ok := c.plans()[host]
		return ok && p.Phase != store.PhasePending
	}
}

// statusAndPlanShow checks that `rollboot status` and `rollboot plan` both name
// the hold.
func (c *cluster) statusAndPlanShow(t *testing.T, host, want string) {
	t.Helper()
	if out := c.cli("status"); !strings.Contains(out, want) {
		t.Errorf("rollboot status does not show %q for %s:\n%s", want, host, out)
	}
	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	if out := c.cli("plan", "--config", cfg); !strings.Contains(out, want) {
		t.Errorf("rollboot plan does not show %q:\n%s", want, out)
	}
}

// A firing alert holds every new drain, with its name in status and plan; once
// it resolves, the recheck timer (not the 30 s resync) lets the rollout go.
// With Prometheus stopped, new drains hold as well, saying it is unreachable.
func TestAlertsHoldRollout(t *testing.T) {
	t.Parallel()
	g := newTestGauge(t, 1)
	prom := startPrometheus(t, g, "")
	promURL := "http://" + prom.addr
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, resync: productionResync,
		policy: fmt.Sprintf("alerts {\n  prometheus_url = %q\n  recheck = %q\n}\n", promURL, alertRecheck)})
	c.waitFor("Prometheus to fire the alert", 60*time.Second, func() bool { return promFiring(prom) })
	hosts, held := c.heldByAlert(t)
	// Held across several rechecks: no drain starts.
	time.Sleep(2 * alertRecheck)
	if !c.pendingWith(hosts[0], held)() {
		t.Fatalf("the host moved while the alert fired: %+v", c.plans()[hosts[0]])
	}

	start := time.Now()
	g.v.Store(0)
	c.within("the drain to start once the alert resolved", start, c.leftPending(hosts[0]))
	c.waitFor("the host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))

	// Prometheus gone: fail closed.
	prom.stop(t)
	c.needReboot(hosts[1])
	unreachable := "no new drain starts: cannot tell whether alerts fire: Prometheus at " + promURL + ": unreachable"
	c.waitFor("the host held by the unreachable Prometheus", 60*time.Second, c.pendingWith(hosts[1], unreachable))
	c.statusAndPlanShow(t, hosts[1], unreachable)
	if c.plans()[hosts[2]].Phase != "" && c.plans()[hosts[2]].Phase != store.PhaseIdle {
		t.Errorf("%s has a cycle: %+v", hosts[2], c.plans()[hosts[2]])
	}
	// Turning the gate off (a policy without the block) releases it.
	c.applyPolicy("group \"all\" {\n  concurrency = 1\n}\n")
	c.waitFor("the second host rebooted", 60*time.Second, c.rebootedAll(hosts[:2]))
}

// With an Alertmanager, a silence of the firing alert releases the hold: the
// alert still fires in Prometheus, but Alertmanager says it is silenced.
func TestAlertmanagerSilenceReleasesHold(t *testing.T) {
	t.Parallel()
	am := startAlertmanager(t)
	g := newTestGauge(t, 1)
	prom := startPrometheus(t, g, am.addr)
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		policy: fmt.Sprintf("alerts {\n  prometheus_url = %q\n  alertmanager_url = %q\n  firing_only = true\n  recheck = %q\n}\n",
			"http://"+prom.addr, "http://"+am.addr, alertRecheck)})
	c.waitFor("Alertmanager to receive the alert", 60*time.Second, func() bool { return amState(am) == "active" })
	hosts, _ := c.heldByAlert(t)

	start := time.Now()
	amSilence(t, am)
	c.within("the drain to start once the alert is silenced", start, c.leftPending(hosts[0]))
	if !promFiring(prom) {
		t.Error("the alert stopped firing in Prometheus: the silence was not what released the hold")
	}
	if s := amState(am); s != "suppressed" {
		t.Errorf("Alertmanager's alert state %q, want suppressed", s)
	}
	c.waitFor("the host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))
}

// heldByAlert starts the cluster, asks for a reboot of its first host, and
// waits for the test's alert to hold it, as `status` and `plan` say; it returns
// the hosts and the hold's text.
func (c *cluster) heldByAlert(t *testing.T) ([]string, string) {
	t.Helper()
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts[0])
	held := "no new drain starts while alerts fire: " + testAlertName
	c.waitFor("the host held by the alert", 60*time.Second, c.pendingWith(hosts[0], held))
	c.statusAndPlanShow(t, hosts[0], held)
	return hosts, held
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dashboardQueries reads every query of the shipped Grafana dashboard, by
// panel title.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "rollboot.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	return out
}

// promResult is the answer of Prometheus's query API.
type promResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		Result []json.RawMessage `json:"result"`
	} `json:"data"`
}

// promQuery evaluates expr now; ok is false when Prometheus did not answer.
func promQuery(prom *promProc, expr string) (r promResult, ok bool) {
	resp, err := http.Get("http://" + prom.addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	return r, json.NewDecoder(resp.Body).Decode(&r) == nil
}

// seriesName finds the series names a query reads.
var seriesName = regexp.MustCompile(`\brollboot_[a-z_]+\b`)

// TestGrafanaDashboardQueries runs a rollout with a real Prometheus (Debian's
// prometheus) scraping the coordinator every second, then evaluates every
// query of deploy/grafana/rollboot.json through Prometheus's HTTP API: each
// must evaluate without error, and a query whose series all exist after the
// rollout must return something.
func TestGrafanaDashboardQueries(t *testing.T) {
	t.Parallel()
	bin := promBinary(t, "prometheus", "prometheus")
	addr := freeAddr(t)
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, coordOnly: fmt.Sprintf("telemetry {\n  listen = %q\n}\n", addr)})
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: rollboot-coordinator\n    static_configs:\n      - targets: [%q]\n", addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := startPromProc(t, "prometheus", bin, promAddr, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	c.start()
	hosts := c.clients()
	c.waitFor("Prometheus scrapes the coordinator", 60*time.Second, func() bool {
		r, ok := promQuery(prom, "rollboot_leader == 1")
		return ok && len(r.Data.Result) == 1
	})
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	// The rollout's counts are in Prometheus, and a rate over them sees the
	// change (two samples or more after it).
	c.waitFor("Prometheus has the rollout", 60*time.Second, func() bool {
		r, ok := promQuery(prom, fmt.Sprintf(`increase(rollboot_reboots_total{outcome="rebooted"}[1h]) > 0 and rollboot_reboots_total >= %d`, len(hosts)))
		return ok && len(r.Data.Result) == 1
	})
	checked := 0
	for title, exprs := range dashboardQueries(t) {
		for _, expr := range exprs {
			checked++
			r, ok := promQuery(prom, expr)
			if !ok || r.Status != "success" {
				t.Errorf("panel %q: %s: %s %s %s", title, expr, r.Status, r.ErrorType, r.Error)
				continue
			}
			if len(r.Data.Result) > 0 {
				continue
			}
			var missing []string
			for _, name := range seriesName.FindAllString(expr, -1) {
				if s, ok := promQuery(prom, "count({__name__="+fmt.Sprintf("%q", name)+"})"); !ok || len(s.Data.Result) == 0 {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				t.Errorf("panel %q: %s: no result, though every series it reads exists after the rollout", title, expr)
			} else {
				t.Logf("panel %q: no result: no series %s after this rollout", title, strings.Join(missing, ", "))
			}
		}
	}
	if checked == 0 {
		t.Fatal("the dashboard has no query")
	}
}

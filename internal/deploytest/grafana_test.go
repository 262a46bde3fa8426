package deploytest

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// metricName finds rollboot's metric names in a query.
var metricName = regexp.MustCompile(`\brollboot_[a-z_]+\b`)

// baseMetric is the metric a series name belongs to (a histogram's buckets,
// sum and count belong to the histogram).
func baseMetric(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && strings.HasSuffix(b, "_seconds") {
			return b
		}
	}
	return name
}

// The shipped Grafana dashboard: every panel but the rows queries Prometheus
// through the dashboard's data source variable, and every rollboot metric it
// names is documented in docs/metrics.md. (internal/e2e's
// TestGrafanaDashboardQueries evaluates each query against a real Prometheus
// after a rollout.)
func TestGrafanaDashboard(t *testing.T) {
	path := deployPath("grafana", "rollboot.json")
	var d Dashboard
	if err := json.Unmarshal(read(t, path), &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q", path, d.UID, d.Title)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			vars["${"+v.Name+"}"] = true
		}
	}
	docs := string(read(t, filepath.Join(root, "docs", "metrics.md")))
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || !vars[p.Datasource.UID] {
			t.Errorf("panel %q: data source %+v, want the dashboard's Prometheus variable", p.Title, p.Datasource)
		}
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: grid position %+v outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if refs[tg.RefID] || tg.RefID == "" {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no rollboot metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !strings.Contains(docs, "`"+baseMetric(n)+"`") {
					t.Errorf("panel %q: metric %s is not in docs/metrics.md", p.Title, baseMetric(n))
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
}

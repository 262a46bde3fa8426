package config

import (
	"strings"
	"testing"
	"time"
)

func compilePolicySrc(t *testing.T, src string) (*Rules, error) {
	t.Helper()
	p, err := ParsePolicy([]byte(src), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return CompilePolicy(p)
}

func TestAlertsDefaultsAreOff(t *testing.T) {
	r := DefaultRules()
	g := r.cc.AlertGate
	if g.Enabled() || g.Timeout != 10*time.Second || g.Recheck != 30*time.Second || g.Filter == nil || g.FilterMatchOnly {
		t.Errorf("default alert gate = %+v", g)
	}
	// rollboot's own alerts fire while a rollout waits: by default they do
	// not hold it.
	if g.Filter != nil && (!g.Filter.MatchString("RollbootRebootRequiredTooLong") || g.Filter.MatchString("NodeDown")) {
		t.Errorf("default filter %q: ignores rollboot's alerts only?", g.Filter)
	}
	for _, want := range []string{"alerts {", `prometheus_url    = ""`, `filter            = "^Rollboot"`, `timeout           = "10s"`, `recheck           = "30s"`} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("policy rendering lacks %q:\n%s", want, r.String())
		}
	}
}

func TestAlertsLoad(t *testing.T) {
	r, err := compilePolicySrc(t, `alerts {
  prometheus_url    = "https://user:s3cret@prometheus:9090"
  alertmanager_url  = "http://alertmanager:9093"
  filter            = "^(RebootRequired)$"
  filter_match_only = true
  firing_only       = true
  timeout           = "3s"
  recheck           = "1m"
}
`)
	if err != nil {
		t.Fatal(err)
	}
	g := r.cc.AlertGate
	if g.PrometheusURL != "https://user:s3cret@prometheus:9090" || g.AlertmanagerURL != "http://alertmanager:9093" ||
		!g.FilterMatchOnly || !g.FiringOnly || g.Timeout != 3*time.Second || g.Recheck != time.Minute {
		t.Errorf("alert gate = %+v", g)
	}
	if g.Filter == nil || !g.Filter.MatchString("RebootRequired") || g.Filter.MatchString("NodeDown") {
		t.Errorf("filter = %v", g.Filter)
	}
	// The rules reach the configuration in force.
	local, err := LoadBytes(nil, "local.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cc := local.With(r); cc.AlertGate.PrometheusURL != g.PrometheusURL || cc.Alerts.Recheck != time.Minute {
		t.Errorf("With dropped the alerts block: %+v", cc.AlertGate)
	}
	s := r.String()
	if strings.Contains(s, "s3cret") {
		t.Errorf("the rendering shows the password:\n%s", s)
	}
	if !strings.Contains(s, `filter_match_only = true`) || !strings.Contains(s, `"https://user:xxxxx@prometheus:9090"`) {
		t.Errorf("the rendering lacks a setting:\n%s", s)
	}
}

func TestAlertsErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      string
	}{
		{name: "bad regexp", src: "alerts {\n  filter = \"(\"\n}\n", want: "p.hcl:2:12: alerts.filter: invalid regular expression"},
		{name: "not http", src: "alerts {\n  prometheus_url = \"ftp://p:9090\"\n}\n", want: `p.hcl:2:20: alerts.prometheus_url: "ftp://p:9090" must start with http:// or https://`},
		{name: "no host", src: "alerts {\n  alertmanager_url = \"http://\"\n}\n", want: `p.hcl:2:22: alerts.alertmanager_url: "http:" has no host`},
		{name: "query", src: "alerts {\n  prometheus_url = \"http://p:9090/?x=1\"\n}\n", want: "must have no query or fragment"},
		{name: "zero timeout", src: "alerts {\n  timeout = \"0s\"\n}\n", want: "p.hcl:2:13: alerts.timeout: must be greater than 0"},
		{name: "negative recheck", src: "alerts {\n  recheck = \"-1s\"\n}\n", want: "p.hcl:2:13: alerts.recheck: must be greater than 0"},
		{name: "bad duration", src: "alerts {\n  recheck = \"soon\"\n}\n", want: `alerts.recheck: invalid duration "soon"`},
		{name: "unknown attribute", src: "alerts {\n  url = \"http://p\"\n}\n", want: `p.hcl:2:3: Unsupported argument`},
		{name: "twice", src: "alerts {}\nalerts {}\n", want: "p.hcl:2:1: duplicate alerts block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compilePolicySrc(t, tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestAlertsURLCredentialsNotInErrors(t *testing.T) {
	_, err := compilePolicySrc(t, "alerts {\n  prometheus_url = \"ftp://u:s3cret@p:9090\"\n}\n")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error = %v", err)
	}
}

func TestAlertsInALocalFile(t *testing.T) {
	_, err := LoadBytes([]byte("alerts {\n  prometheus_url = \"http://p:9090\"\n}\n"), "t.hcl")
	if err == nil || !strings.Contains(err.Error(), "t.hcl:1:1: alerts block is a rollout policy setting") {
		t.Fatalf("error = %v", err)
	}
}

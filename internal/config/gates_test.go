package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/healthgate"
)

func TestPolicyGates(t *testing.T) {
	src := `
alerts {
  prometheus_url   = "http://prom:9090"
  alertmanager_url = "http://am:9093"
}
group "storage" {
  filter = "NodePool == \"storage\""
}
gate "ceph" {
  groups  = ["storage"]
  recheck = "10s"
  promql {
    query = "ceph_health_status != 0"
  }
}
gate "crit" {
  alerts {
    matchers = ["severity=\"critical\""]
  }
}
gate "db" {
  consul_service {
    name        = "pg"
    min_passing = 2
  }
}
gate "api" {
  nomad_job {
    job = "api"
  }
}
gate "lb" {
  timeout = "2s"
  http {
    url = "https://lb/healthz"
  }
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []healthgate.Gate{
		{Name: "ceph", Kind: healthgate.KindPromQL, Groups: []string{"storage"}, Timeout: 10 * time.Second, Recheck: 10 * time.Second,
			PrometheusURL: "http://prom:9090", Query: "ceph_health_status != 0", AlertmanagerURL: "http://am:9093",
			MinPassing: 1, Namespace: "default", MinHealthy: 1, ExpectStatus: 200},
		{Name: "crit", Kind: healthgate.KindAlerts, Timeout: 10 * time.Second, Recheck: 30 * time.Second, PrometheusURL: "http://prom:9090",
			AlertmanagerURL: "http://am:9093", Matchers: []string{`severity="critical"`}, MinPassing: 1, Namespace: "default", MinHealthy: 1, ExpectStatus: 200},
		{Name: "db", Kind: healthgate.KindConsulService, Timeout: 10 * time.Second, Recheck: 30 * time.Second, PrometheusURL: "http://prom:9090",
			AlertmanagerURL: "http://am:9093", Service: "pg", MinPassing: 2, Namespace: "default", MinHealthy: 1, ExpectStatus: 200},
		{Name: "api", Kind: healthgate.KindNomadJob, Timeout: 10 * time.Second, Recheck: 30 * time.Second, PrometheusURL: "http://prom:9090",
			AlertmanagerURL: "http://am:9093", MinPassing: 1, Job: "api", Namespace: "default", MinHealthy: 1, ExpectStatus: 200},
		{Name: "lb", Kind: healthgate.KindHTTP, Timeout: 2 * time.Second, Recheck: 30 * time.Second, PrometheusURL: "http://prom:9090",
			AlertmanagerURL: "http://am:9093", MinPassing: 1, Namespace: "default", MinHealthy: 1, URL: "https://lb/healthz", ExpectStatus: 200},
	}
	if got := r.cc.HealthGates; !reflect.DeepEqual(got, want) {
		t.Errorf("gates\n%+v\nwant\n%+v", got, want)
	}
	if out := r.String(); !strings.Contains(out, `gate "ceph" {`) || !strings.Contains(out, `query          = "ceph_health_status != 0"`) ||
		strings.Contains(out, "consul_service {\n    name        = \"\"") {
		t.Errorf("rendering lacks the gates:\n%s", out)
	}
}

func TestPolicyGateErrors(t *testing.T) {
	src := `gate "none" {
}
gate "two" {
  promql {
    query = "up == 0"
  }
  http {
    url = "http://x/"
  }
}
gate "noprom" {
  groups = ["web"]
  promql {
    query = "up == 0"
  }
}
gate "noam" {
  alerts {
    matchers = ["severity"]
  }
}
gate "none" {
  http {
    url           = "ftp://x/"
    expect_status = 42
  }
}
gate "db" {
  consul_service {
    name        = "pg"
    min_passing = 0
  }
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompilePolicy(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`policy.hcl:1:1: gate "none": has no check: give it one of promql { query }`,
		`policy.hcl:3:1: gate "two": has 2 checks: one per gate`,
		`policy.hcl:12:13: gate "noprom".groups: unknown group "web"`,
		`policy.hcl:14:13: gate "noprom".promql.query: no Prometheus to ask`,
		`policy.hcl:19:17: gate "noam".alerts.matchers: "severity" has no operator`,
		`policy.hcl:19:16: gate "noam".alerts.matchers: no Alertmanager to ask`,
		`policy.hcl:22:6: gate "none": duplicate gate name, first defined at policy.hcl:1:1`,
		`policy.hcl:24:21: gate "none".http.url: "ftp://x/" must start with http:// or https://`,
		`policy.hcl:25:21: gate "none".http.expect_status: must be an HTTP status code, 100 to 599, got 42`,
		`policy.hcl:31:19: gate "db".consul_service.min_passing: must be at least 1, got 0`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

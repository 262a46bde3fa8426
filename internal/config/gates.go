package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/silence"
)

// GateConfig is a `gate "name" {}` block of the policy: a health gate that
// must be open before a drain of the groups it guards starts (package
// healthgate). It holds one check: one of its nested blocks.
type GateConfig struct {
	Name             string
	Groups           []string
	Timeout, Recheck time.Duration
	PromQL           GatePromQLConfig
	Alerts           GateAlertsConfig
	ConsulService    GateConsulConfig
	NomadJob         GateNomadJobConfig
	HTTP             GateHTTPConfig
}

// GatePromQLConfig is a gate's promql block.
type GatePromQLConfig struct{ Query, PrometheusURL string }

// GateAlertsConfig is a gate's alerts block.
type GateAlertsConfig struct {
	Matchers        []string
	AlertmanagerURL string
}

// GateConsulConfig is a gate's consul_service block.
type GateConsulConfig struct {
	Name       string
	MinPassing int
}

// GateNomadJobConfig is a gate's nomad_job block.
type GateNomadJobConfig struct {
	Job, Namespace string
	MinHealthy     int
}

// GateHTTPConfig is a gate's http block.
type GateHTTPConfig struct {
	URL          string
	ExpectStatus int
}

var gatePromQLTable = &table{typ: "promql", of: reflect.TypeFor[GatePromQLConfig](), settings: []setting{
	{name: "query", field: "Query",
		doc: "A PromQL expression, evaluated as an instant query (`/api/v1/query`). The gate is **closed** while " +
			"the result has a sample whose value is not 0: write the condition that must hold the drains, as " +
			"in an alerting rule (`ceph_health_status != 0`, `up{job=\"db\"} == 0`). An empty result, or every " +
			"value 0 (`... == bool 1` false), opens it. A result that is neither a vector nor a scalar closes it."},
	{name: "prometheus_url", field: "PrometheusURL", shown: redactedURL, check: value(alertURL),
		doc: "Base URL of the Prometheus server asked. `\"\"`: `alerts.prometheus_url` (one of them must be set)."},
}}

var gateAlertsTable = &table{typ: "alerts", of: reflect.TypeFor[GateAlertsConfig](), settings: []setting{
	{name: "matchers", field: "Matchers", check: each(atElement, gateMatcher),
		doc: "Label matchers in Alertmanager's syntax (`severity=\"critical\"`, `cluster=~\"ceph.*\"`), all of " +
			"which an alert must match. The gate is **closed** while Alertmanager has an active alert matching " +
			"them (silenced and inhibited ones do not count). At least one."},
	{name: "alertmanager_url", field: "AlertmanagerURL", shown: redactedURL, check: value(alertURL),
		doc: "Base URL of the Alertmanager asked (`/api/v2/alerts`). `\"\"`: `alerts.alertmanager_url` (one of " +
			"them must be set)."},
}}

var gateConsulTable = &table{typ: "consul_service", of: reflect.TypeFor[GateConsulConfig](), settings: []setting{
	{name: "name", field: "Name",
		doc: "The Consul service. The gate is open while at least `min_passing` of its instances pass all their " +
			"checks (`/v1/health/service/:name?passing`), read through the coordinator's Consul client " +
			"(`CONSUL_HTTP_ADDR` and the rest of its environment); without one the gate stays closed, saying so."},
	{name: "min_passing", field: "MinPassing", def: 1, check: value(atLeast(1, "")),
		doc: "Least passing instances. At least 1."},
}}

var gateNomadJobTable = &table{typ: "nomad_job", of: reflect.TypeFor[GateNomadJobConfig](), settings: []setting{
	{name: "job", field: "Job",
		doc: "The Nomad job. The gate is open while at least `min_healthy` of its allocations run and are healthy " +
			"(a deployment's allocation once its deployment marked it healthy, any other running one)."},
	{name: "namespace", field: "Namespace", def: "default", doc: "The job's namespace."},
	{name: "min_healthy", field: "MinHealthy", def: 1, check: value(atLeast(1, "")),
		doc: "Least healthy allocations. At least 1."},
}}

var gateHTTPTable = &table{typ: "http", of: reflect.TypeFor[GateHTTPConfig](), settings: []setting{
	{name: "url", field: "URL", shown: redactedURL, check: value(checkURL),
		doc: "`http://` or `https://` URL asked with GET (redirects not followed). The gate is open while it " +
			"answers `expect_status`. User information in the URL is sent as basic authentication and never " +
			"shown."},
	{name: "expect_status", field: "ExpectStatus", def: 200, check: value(httpStatus),
		doc: "The status code that opens the gate. 100 to 599."},
}}

var gateTable = &table{typ: "gate", of: reflect.TypeFor[GateConfig](), label: "Name",
	labelDoc: "The gate's name, shown in the reasons and the metrics. Required, unique.",
	settings: []setting{
		{name: "groups", field: "Groups",
			doc: "The groups whose drains the gate guards (each a `group` block's name, or `default`). `[]`: every group."},
		{name: "timeout", field: "Timeout", def: 10 * time.Second, check: value(positive),
			doc: "Bounds one read of the gate; a read that takes longer closes it. > 0."},
		{name: "recheck", field: "Recheck", def: 30 * time.Second, check: value(positive),
			doc: "How often a closed gate is read again while hosts wait for it. > 0."},
	},
	nested: []nested{
		child{t: gatePromQLTable, field: "PromQL", renderIf: "Query"},
		child{t: gateAlertsTable, field: "Alerts", renderIf: "Matchers"},
		child{t: gateConsulTable, field: "ConsulService", renderIf: "Name"},
		child{t: gateNomadJobTable, field: "NomadJob", renderIf: "Job"},
		child{t: gateHTTPTable, field: "HTTP", renderIf: "URL"},
	},
}

func gateMatcher(m string) error {
	_, err := silence.ParseMatcher(m)
	return err
}

func httpStatus(n int) error {
	if n < 100 || n > 599 {
		return fmt.Errorf("must be an HTTP status code, 100 to 599, got %d", n)
	}
	return nil
}

// checkURL checks an http gate's URL ("" is checked by the gate: no check):
// any http or https URL, with a query if the check needs one.
func checkURL(raw string) error {
	_, err := httpURL(raw)
	return err
}

// kinds are the checks the gate sets.
func (gc GateConfig) kinds() []healthgate.Kind {
	var out []healthgate.Kind
	for kind, set := range map[healthgate.Kind]bool{
		healthgate.KindPromQL: gc.PromQL.Query != "", healthgate.KindAlerts: len(gc.Alerts.Matchers) > 0,
		healthgate.KindConsulService: gc.ConsulService.Name != "", healthgate.KindNomadJob: gc.NomadJob.Job != "",
		healthgate.KindHTTP: gc.HTTP.URL != "",
	} {
		if set {
			out = append(out, kind)
		}
	}
	return out
}

// gates checks what ties the gates to the rest: their names, one check each,
// a URL for those that need one, the groups they name.
func (v *validator) gates() {
	groups := map[string]bool{policy.DefaultGroupName: true}
	for _, g := range v.c.Groups {
		groups[g.Name] = true
	}
	first := map[string]int{}
	for i, gc := range v.c.Gates {
		s := labelScope("gate", i, gc.Name)
		v.uniqueLabel("gate", i, gc.Name, first)
		switch k := gc.kinds(); {
		case len(k) == 0:
			v.errorAt(s.key, s.name, "has no check: give it one of promql { query }, alerts { matchers }, consul_service { name }, nomad_job { job } or http { url }")
		case len(k) > 1:
			v.errorAt(s.key, s.name, "has %d checks: one per gate (write a gate for each)", len(k))
		case k[0] == healthgate.KindPromQL && gc.PromQL.PrometheusURL == "" && v.c.Alerts.PrometheusURL == "":
			v.errorf(s.sub("promql").sub("query"), "no Prometheus to ask: set prometheus_url here or alerts.prometheus_url")
		case k[0] == healthgate.KindAlerts && gc.Alerts.AlertmanagerURL == "" && v.c.Alerts.AlertmanagerURL == "":
			v.errorf(s.sub("alerts").sub("matchers"), "no Alertmanager to ask: set alertmanager_url here or alerts.alertmanager_url")
		}
		for k, g := range gc.Groups {
			if !groups[g] {
				v.report(s.sub("groups"), elem(k, fmt.Errorf("unknown group %q", g)))
			}
		}
	}
}

// healthGates compiles the gates, checked.
func (c *Config) healthGates() []healthgate.Gate {
	out := make([]healthgate.Gate, 0, len(c.Gates))
	for _, gc := range c.Gates {
		g := healthgate.Gate{Name: gc.Name, Kind: gc.kinds()[0], Groups: gc.Groups, Timeout: gc.Timeout, Recheck: gc.Recheck,
			PrometheusURL: orDefault(gc.PromQL.PrometheusURL, c.Alerts.PrometheusURL), Query: gc.PromQL.Query,
			AlertmanagerURL: orDefault(gc.Alerts.AlertmanagerURL, c.Alerts.AlertmanagerURL), Matchers: gc.Alerts.Matchers,
			Service: gc.ConsulService.Name, MinPassing: gc.ConsulService.MinPassing,
			Job: gc.NomadJob.Job, Namespace: gc.NomadJob.Namespace, MinHealthy: gc.NomadJob.MinHealthy,
			URL: gc.HTTP.URL, ExpectStatus: gc.HTTP.ExpectStatus}
		out = append(out, g)
	}
	return out
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

package config

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
)

// AlertsConfig is the policy's alerts block: no new drain starts while alerts
// fire (package alertgate; Kured's Prometheus blocker). With neither URL the
// blocker is off.
type AlertsConfig struct {
	// PrometheusURL is the Prometheus server whose active alerts
	// (/api/v1/alerts) hold new drains. Credentials in it are never shown.
	PrometheusURL string
	// AlertmanagerURL is an Alertmanager (/api/v2/alerts): its active alerts
	// hold, its silenced and inhibited ones do not (nor Prometheus's alerts it
	// silences).
	AlertmanagerURL string
	// Filter is a regular expression on alert names: matching alerts are
	// ignored (Kured's --alert-filter-regexp), or with FilterMatchOnly the only
	// ones that hold (--alert-filter-match-only).
	Filter          string
	FilterMatchOnly bool
	// FiringOnly: pending alerts do not hold (--alert-firing-only).
	FiringOnly bool
	// Timeout bounds one request to Prometheus or Alertmanager.
	Timeout time.Duration
	// Recheck is how often a rollout held by alerts asks again.
	Recheck time.Duration
}

// defaultAlertFilter ignores rollboot's own alerts (deploy/prometheus): they
// fire while a rollout waits, and would otherwise hold the rollout that clears
// them.
const defaultAlertFilter = "^Rollboot"

var alertsTable = &table{typ: "alerts", of: reflect.TypeFor[AlertsConfig](), settings: []setting{
	{name: "prometheus_url", field: "PrometheusURL", shown: redactedURL, check: value(alertURL),
		doc: "Base URL of a Prometheus server (`http://` or `https://`, no query). Its active alerts " +
			"(`/api/v1/alerts`: pending and firing) block. User information in the URL is sent as basic " +
			"authentication; reasons and logs drop it and the settings diff of `policy apply` masks the " +
			"password, but the stored source (`policy show`) keeps it, readable by the tokens that may read " +
			"the policy (the coordinators' and the operators', not the plain agents'). `https://` is " +
			"checked against the system's CA certificates."},
	{name: "alertmanager_url", field: "AlertmanagerURL", shown: redactedURL, check: value(alertURL),
		doc: "Base URL of an Alertmanager (its v2 API, `/api/v2/alerts`). Its active alerts block (including " +
			"those it received from other Prometheus servers); its silenced and inhibited ones do not, nor " +
			"the alerts of `prometheus_url` it holds silenced or inhibited (an alert of Prometheus matches " +
			"when Alertmanager's alert has all its labels: external labels may add more). A firing alert " +
			"Alertmanager has not received yet still blocks. Given alone, only Alertmanager is asked."},
	{name: "filter", field: "Filter", def: defaultAlertFilter, check: value(alertFilter),
		doc: "A regular expression ([RE2](https://github.com/google/re2/wiki/Syntax)) on alert names " +
			"(`alertname`), unanchored as written (`\"^(RebootRequired)$\"` to match one name). Alerts " +
			"whose name matches are **ignored**. The default ignores rollboot's own alerts (below). `\"\"`: " +
			"no filter. A malformed expression is an error."},
	{name: "filter_match_only", field: "FilterMatchOnly",
		doc: "Turn `filter` around: **only** alerts whose name matches block."},
	{name: "firing_only", field: "FiringOnly",
		doc: "Pending alerts (their `for` not reached yet) do not block, only firing ones. Alertmanager only " +
			"holds firing alerts."},
	{name: "timeout", field: "Timeout", def: alertgate.DefaultTimeout, check: value(positive),
		doc: "Bounds one request to Prometheus or Alertmanager. > 0."},
	{name: "recheck", field: "Recheck", def: alertgate.DefaultRecheck, check: value(positive),
		doc: "How often a rollout held by alerts asks again. Prometheus and Alertmanager have nothing " +
			"rollboot can watch, so a held rollout gets a pass every `recheck` (besides the passes other " +
			"changes cause): a resolved alert or a new silence releases it within `recheck` plus " +
			"Prometheus's own evaluation delay. > 0."},
}}

// alertRules compiles the alerts block, checked.
func (al AlertsConfig) alertRules() alertgate.Rules {
	r := alertgate.Rules{PrometheusURL: al.PrometheusURL, AlertmanagerURL: al.AlertmanagerURL,
		FilterMatchOnly: al.FilterMatchOnly, FiringOnly: al.FiringOnly, Timeout: al.Timeout, Recheck: al.Recheck}
	if al.Filter != "" {
		r.Filter = regexp.MustCompile(al.Filter)
	}
	return r
}

func alertFilter(f string) error {
	if _, err := regexp.Compile(f); err != nil {
		return fmt.Errorf("invalid regular expression: %v", err)
	}
	return nil
}

// alertURL checks the URL of an alert source ("" is none): an http URL that
// is a server's base, with no query or fragment. Messages never show its
// credentials.
func alertURL(raw string) error {
	u, err := httpURL(raw)
	if err == nil && u != nil && (u.RawQuery != "" || u.Fragment != "") {
		return fmt.Errorf("%q must have no query or fragment: give the server's base URL", u.Redacted())
	}
	return err
}

// httpURL parses an http or https URL with a host ("" is none: nil, nil).
// Messages never show its credentials.
func httpURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("invalid URL: %v", unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", u.Redacted())
	}
	return u, nil
}

// redactedURL is raw with its password masked (url.URL.Redacted).
func redactedURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("(invalid URL, %d characters)", len(raw))
	}
	return u.Redacted()
}

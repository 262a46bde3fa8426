package config

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

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

func defaultAlerts() AlertsConfig {
	return AlertsConfig{Filter: defaultAlertFilter, Timeout: alertgate.DefaultTimeout, Recheck: alertgate.DefaultRecheck}
}

// alerts decodes the alerts block.
func (d *decoder) alerts(body hcl.Body) {
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"prometheus_url", "alertmanager_url", "filter", "filter_match_only", "firing_only", "timeout", "recheck")})
	if content == nil {
		return
	}
	al, a, s := &d.c.Alerts, content.Attributes, scope{"alerts", "alerts"}
	d.str(a, s, "prometheus_url", &al.PrometheusURL)
	d.str(a, s, "alertmanager_url", &al.AlertmanagerURL)
	d.str(a, s, "filter", &al.Filter)
	d.boolean(a, s, "filter_match_only", &al.FilterMatchOnly)
	d.boolean(a, s, "firing_only", &al.FiringOnly)
	d.duration(a, s, "timeout", &al.Timeout)
	d.duration(a, s, "recheck", &al.Recheck)
}

// alerts checks the alerts block and compiles it.
func (v *validator) alerts() alertgate.Rules {
	al, s := &v.c.Alerts, scope{"alerts", "alerts"}
	r := alertgate.Rules{PrometheusURL: al.PrometheusURL, AlertmanagerURL: al.AlertmanagerURL,
		FilterMatchOnly: al.FilterMatchOnly, FiringOnly: al.FiringOnly, Timeout: al.Timeout, Recheck: al.Recheck}
	v.alertURL(s.sub("prometheus_url"), al.PrometheusURL)
	v.alertURL(s.sub("alertmanager_url"), al.AlertmanagerURL)
	if al.Filter != "" && v.good(s.sub("filter")) {
		re, err := regexp.Compile(al.Filter)
		if err != nil {
			v.errorf(s.sub("filter"), "invalid regular expression: %v", err)
		}
		r.Filter = re
	}
	v.positive(s.sub("timeout"), al.Timeout)
	v.positive(s.sub("recheck"), al.Recheck)
	return r
}

// alertURL checks the URL of an alert source ("" is none). Messages never
// show its credentials.
func (v *validator) alertURL(key scope, raw string) {
	if raw == "" || !v.good(key) {
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		v.errorf(key, "invalid URL: %v", unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		v.errorf(key, "%q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		v.errorf(key, "%q has no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		v.errorf(key, "%q must have no query or fragment: give the server's base URL", u.Redacted())
	}
}

// writeAlerts renders the alerts block, a password in a URL masked.
func (c *Config) writeAlerts(root *hclwrite.Body) {
	b := root.AppendNewBlock("alerts", nil).Body()
	al := c.Alerts
	b.SetAttributeValue("prometheus_url", cty.StringVal(redactedURL(al.PrometheusURL)))
	b.SetAttributeValue("alertmanager_url", cty.StringVal(redactedURL(al.AlertmanagerURL)))
	b.SetAttributeValue("filter", cty.StringVal(al.Filter))
	b.SetAttributeValue("filter_match_only", cty.BoolVal(al.FilterMatchOnly))
	b.SetAttributeValue("firing_only", cty.BoolVal(al.FiringOnly))
	b.SetAttributeValue("timeout", durationVal(al.Timeout))
	b.SetAttributeValue("recheck", durationVal(al.Recheck))
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

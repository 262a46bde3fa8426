// Package alertgate decides whether alerts hold every new drain: Kured's
// Prometheus blocker (--prometheus-url, --alert-filter-regexp,
// --alert-filter-match-only, --alert-firing-only), with Alertmanager's silences
// and inhibitions respected when an Alertmanager is given. It is pure: the
// coordinator reads the alerts (coordinator/admitreads.go) and Decide says what
// they mean. It fails closed: an alert source that cannot be read holds.
package alertgate

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Defaults of the alerts block.
const (
	DefaultTimeout = 10 * time.Second
	DefaultRecheck = 30 * time.Second
)

// MaxNames is how many alert names a reason lists; the others are counted.
const MaxNames = 5

// Rules are the alerts block, checked.
type Rules struct {
	// PrometheusURL is the Prometheus server asked for its active alerts
	// (/api/v1/alerts); "" asks none.
	PrometheusURL string
	// AlertmanagerURL is the Alertmanager asked for its alerts
	// (/api/v2/alerts); "" asks none. Its silenced and inhibited alerts do
	// not block, including those Prometheus reports.
	AlertmanagerURL string
	// Filter: alerts whose name matches are ignored, or, with
	// FilterMatchOnly, the only ones that block. nil: every alert blocks.
	Filter          *regexp.Regexp
	FilterMatchOnly bool
	// FiringOnly: Prometheus's pending alerts (their `for` not yet reached)
	// do not block.
	FiringOnly bool
	// Timeout bounds one request to each source.
	Timeout time.Duration
	// Recheck is how often a rollout held by alerts asks again.
	Recheck time.Duration
}

// Enabled reports whether any source is configured: otherwise the gate is off.
func (r Rules) Enabled() bool { return r.PrometheusURL != "" || r.AlertmanagerURL != "" }

// Alert states as Prometheus reports them (rules/alerting.go AlertState).
const (
	StatePending = "pending"
	StateFiring  = "firing"
)

// Alert is one active alert of Prometheus.
type Alert struct {
	Labels map[string]string // alertname among them
	State  string            // StatePending or StateFiring
}

// ManagedAlert is one alert as Alertmanager holds it.
type ManagedAlert struct {
	Labels map[string]string
	// Suppressed: silenced or inhibited (Alertmanager's state "suppressed").
	// Alertmanager's "active" and "unprocessed" alerts are not.
	Suppressed bool
}

// Observation is what the coordinator read, source by source. A source that
// is not configured is left zero.
type Observation struct {
	Prometheus      []Alert
	PrometheusErr   error
	Alertmanager    []ManagedAlert
	AlertmanagerErr error
}

// Verdict is what an observation means for new drains.
type Verdict struct {
	// Blocking are the names of the alerts that hold, sorted, each once.
	Blocking []string
	// Unknown says why it cannot be told whether alerts fire (a source could
	// not be read); "" when it can. It holds as well (fail closed).
	Unknown string
}

// Holds reports whether new drains wait.
func (v Verdict) Holds() bool { return len(v.Blocking) > 0 || v.Unknown != "" }

// Names is the blocking alerts' names as a reason shows them: at most MaxNames,
// then how many more.
func (v Verdict) Names() string {
	names := v.Blocking
	more := 0
	if len(names) > MaxNames {
		names, more = names[:MaxNames], len(names)-MaxNames
	}
	s := strings.Join(names, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// Decide returns the verdict of an observation under rules r.
//
// Prometheus says which alerts are active (pending or firing); Alertmanager,
// when given, says which are silenced or inhibited, and adds the active alerts
// it received from elsewhere. An alert of Prometheus is suppressed when
// Alertmanager holds a suppressed alert with all its labels (Alertmanager's
// carry Prometheus's external labels on top). A firing alert Alertmanager has
// not received yet still blocks.
func Decide(r Rules, o Observation) Verdict {
	var v Verdict
	var problems []string
	if r.PrometheusURL != "" && o.PrometheusErr != nil {
		problems = append(problems, fmt.Sprintf("Prometheus at %s: %v", RedactURL(r.PrometheusURL), o.PrometheusErr))
	}
	if r.AlertmanagerURL != "" && o.AlertmanagerErr != nil {
		problems = append(problems, fmt.Sprintf("Alertmanager at %s: %v", RedactURL(r.AlertmanagerURL), o.AlertmanagerErr))
	}
	v.Unknown = strings.Join(problems, "; ")
	block := map[string]bool{}
	if r.PrometheusURL != "" && o.PrometheusErr == nil {
		for _, a := range o.Prometheus {
			if r.FiringOnly && a.State != StateFiring {
				continue
			}
			if r.AlertmanagerURL != "" && o.AlertmanagerErr == nil && suppressed(a.Labels, o.Alertmanager) {
				continue
			}
			if name := a.Labels[AlertNameLabel]; counts(r, name) {
				block[name] = true
			}
		}
	}
	if r.AlertmanagerURL != "" && o.AlertmanagerErr == nil {
		for _, a := range o.Alertmanager {
			if name := a.Labels[AlertNameLabel]; !a.Suppressed && counts(r, name) {
				block[name] = true
			}
		}
	}
	for name := range block {
		v.Blocking = append(v.Blocking, name)
	}
	sort.Strings(v.Blocking)
	return v
}

// AlertNameLabel is the label that names an alert (model.AlertNameLabel).
const AlertNameLabel = "alertname"

// counts reports whether an alert of this name blocks under the filter (Kured's
// matchesRegex: a match is ignored, or with FilterMatchOnly is the only kind
// that blocks).
func counts(r Rules, name string) bool {
	if r.Filter == nil {
		return true
	}
	return r.Filter.MatchString(name) == r.FilterMatchOnly
}

// suppressed reports whether Alertmanager holds a suppressed alert carrying all
// of labels.
func suppressed(labels map[string]string, managed []ManagedAlert) bool {
	for _, m := range managed {
		if m.Suppressed && subset(labels, m.Labels) {
			return true
		}
	}
	return false
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// RedactURL is u without its user information (credentials), for messages.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an invalid URL)"
	}
	p.User = nil
	return p.String()
}

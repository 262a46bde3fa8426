// Package healthgate decides the policy's health gates: checks of the
// cluster's health that must pass before a drain starts (a PromQL expression,
// Alertmanager alerts by label matchers, a Consul service's passing instances,
// a Nomad job's healthy allocations, an HTTP check). Decide is pure; package
// gateread reads what it decides on.
//
// A gate fails closed: what cannot be read holds the drains it guards, with
// the reason.
package healthgate

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is what a gate checks.
type Kind string

// The kinds of gates.
const (
	KindPromQL        Kind = "promql"
	KindAlerts        Kind = "alerts"
	KindConsulService Kind = "consul_service"
	KindNomadJob      Kind = "nomad_job"
	KindHTTP          Kind = "http"
)

// Gate is one gate of the policy, checked.
type Gate struct {
	Name string
	Kind Kind
	// Groups are the groups whose drains it guards; none: every group.
	Groups []string
	// KindPromQL: Query, asked of PrometheusURL.
	PrometheusURL, Query string
	// KindAlerts: Matchers (Alertmanager's syntax), asked of AlertmanagerURL.
	AlertmanagerURL string
	Matchers        []string
	// KindConsulService: at least MinPassing instances of Service pass.
	Service    string
	MinPassing int
	// KindNomadJob: at least MinHealthy allocations of Job in Namespace run
	// and are healthy.
	Job, Namespace string
	MinHealthy     int
	// KindHTTP: GET URL answers ExpectStatus.
	URL          string
	ExpectStatus int
	// Timeout bounds one read; Recheck is how often a closed gate is read
	// again.
	Timeout, Recheck time.Duration
}

// Guards reports whether the gate guards the drains of group.
func (g Gate) Guards(group string) bool {
	return len(g.Groups) == 0 || slices.Contains(g.Groups, group)
}

// Sample is one element of a PromQL result: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Observation is what was read for a gate.
type Observation struct {
	// Err: the read failed (the gate is closed).
	Err error
	// Samples: KindPromQL's result (a scalar is one sample without labels).
	Samples []Sample
	// Alerts: KindAlerts's active alerts, by name.
	Alerts []string
	// Passing: KindConsulService's passing instances.
	Passing int
	// Healthy: KindNomadJob's healthy allocations, of Allocs running.
	Healthy, Allocs int
	// Status: KindHTTP's answer's status code.
	Status int
}

// Verdict is a gate's decision.
type Verdict struct {
	Open bool
	// Reason says why it is closed ("" when open): the gate's name, what it
	// checks and what was found.
	Reason string
}

// Decide decides whether the gate is open given what was read. A PromQL
// gate opens on an empty result or one whose every value is 0 (false);
// an alerts gate while no alert matches; a consul_service gate with at least
// MinPassing passing instances; a nomad_job gate with at least MinHealthy
// healthy allocations; an http gate on ExpectStatus. A read that failed
// closes it.
func Decide(g Gate, o Observation) Verdict {
	closed := func(format string, args ...any) Verdict {
		return Verdict{Reason: fmt.Sprintf("health gate %q: ", g.Name) + fmt.Sprintf(format, args...)}
	}
	if o.Err != nil {
		return closed("cannot tell (%s): %v", g.Kind, o.Err)
	}
	switch g.Kind {
	case KindPromQL:
		var truthy []string
		for _, s := range o.Samples {
			if s.Value != 0 || math.IsNaN(s.Value) {
				truthy = append(truthy, sampleText(s))
			}
		}
		if len(truthy) > 0 {
			return closed("%s is true: %s", g.Query, firstOf(truthy))
		}
	case KindAlerts:
		if len(o.Alerts) > 0 {
			return closed("alerts matching {%s} fire: %s", strings.Join(g.Matchers, ", "), firstOf(o.Alerts))
		}
	case KindConsulService:
		if o.Passing < g.MinPassing {
			return closed("Consul service %s has %d passing instances, fewer than %d", g.Service, o.Passing, g.MinPassing)
		}
	case KindNomadJob:
		if o.Healthy < g.MinHealthy {
			return closed("Nomad job %s/%s has %d healthy allocations (of %d running), fewer than %d", g.Namespace, g.Job, o.Healthy, o.Allocs, g.MinHealthy)
		}
	case KindHTTP:
		if o.Status != g.ExpectStatus {
			return closed("GET %s answered %d, want %d", shownURL(g.URL), o.Status, g.ExpectStatus)
		}
	default:
		return closed("unknown kind %q", g.Kind)
	}
	return Verdict{Open: true}
}

// shownURL is raw without its credentials and query, which may hold secrets.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// sampleText shows a sample as PromQL does: {name="value", ...} value.
func sampleText(s Sample) string {
	names := make([]string, 0, len(s.Labels))
	for n := range s.Labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%q", n, s.Labels[n])
	}
	return fmt.Sprintf("{%s} %g", strings.Join(parts, ", "), s.Value)
}

// firstOf lists the first three items, then how many more.
func firstOf(items []string) string {
	sort.Strings(items)
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:3], ", "), len(items)-3)
}

// Package gatepoll reads, for the coordinator's pass, the admission gates that
// look at systems outside Nomad (the alerts, and the policy's health gates):
// once per pass that asks, deciding each read with its pure package
// (alertgate, healthgate), logging a hold when it starts, changes and ends,
// and keeping their metrics.
//
// Prometheus, Alertmanager and a health gate's source have nothing to watch:
// they are read only in a pass with a host waiting to start, so an idle
// cluster costs nothing, and a held rollout looks again at the gate's recheck.
package gatepoll

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/alertread"
	"github.com/rollboot/rollboot/internal/gateread"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// AlertReader reads the alerts of the sources rules name. Each source that
// cannot be read reports its error in the observation; an error never shows
// the credentials of a URL.
type AlertReader interface {
	ReadAlerts(ctx context.Context, rules alertgate.Rules) alertgate.Observation
}

// Alerts is the alert gate's state across passes (policy block alerts: no new
// drain starts while alerts fire). Used by the pass's goroutine only.
type Alerts struct {
	reader  AlertReader
	log     *slog.Logger
	metrics alertMetrics
	// logged is the hold last logged ("" : none), so that a hold is logged
	// when it starts, changes and ends, not at every pass.
	logged string
	// next: when a held rollout asks again (zero: it is not held).
	next time.Time
}

// NewAlerts returns the alert gate's state, reading with reader (nil: over
// HTTP, package alertread) and registering its series in reg.
func NewAlerts(reader AlertReader, reg prometheus.Registerer, log *slog.Logger) *Alerts {
	if reader == nil {
		reader = &alertread.HTTP{}
	}
	return &Alerts{reader: reader, log: log, metrics: newAlertMetrics(reg)}
}

// Read reads the alerts and decides what they mean for new drains.
func (a *Alerts) Read(ctx context.Context, r alertgate.Rules, now time.Time) alertgate.Verdict {
	obs := a.reader.ReadAlerts(ctx, r)
	v := alertgate.Decide(r, obs)
	a.metrics.observed(r, obs, v)
	a.next = time.Time{}
	if v.Holds() {
		a.next = now.Add(r.Recheck)
	}
	held := admission.AlertHold(v).String()
	if held == a.logged {
		return v
	}
	switch {
	case v.Unknown != "":
		a.log.Warn("no new drain starts: cannot tell whether alerts fire", "err", v.Unknown, "recheck", r.Recheck)
	case v.Holds():
		a.log.Info("no new drain starts while alerts fire", "alerts", v.Names(), "recheck", r.Recheck)
	default:
		a.log.Info("no alert holds new drains any more")
	}
	a.logged = held
	return v
}

// NotRead is the gate's state after a pass that did not read the alerts (off,
// or no host waits to start): nothing is held, nothing is due.
func (a *Alerts) NotRead() {
	a.next = time.Time{}
	a.metrics.blocking.Set(0)
}

// Next is when a rollout the alerts hold asks again (zero: not held).
func (a *Alerts) Next() time.Time { return a.next }

// Forget ends a term: nothing held, nothing logged.
func (a *Alerts) Forget() {
	a.NotRead()
	a.logged = ""
}

// alertMetrics are the alert gate's series.
type alertMetrics struct {
	blocking prometheus.Gauge
	errors   *prometheus.CounterVec
}

func newAlertMetrics(reg prometheus.Registerer) alertMetrics {
	m := alertMetrics{
		blocking: telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "rollboot_alerts_blocking",
			Help: "Alerts (by name) holding every new drain in the last pass; 0 when no host waits to start (the alerts are not read then)."})),
		errors: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_alerts_query_errors_total",
			Help: "Reads of the alerts that failed, by source (prometheus, alertmanager): new drains wait."}, []string{"source"})),
	}
	m.errors.WithLabelValues("prometheus")
	m.errors.WithLabelValues("alertmanager")
	return m
}

func (m alertMetrics) observed(r alertgate.Rules, o alertgate.Observation, v alertgate.Verdict) {
	m.blocking.Set(float64(len(v.Blocking)))
	if r.PrometheusURL != "" && o.PrometheusErr != nil {
		m.errors.WithLabelValues("prometheus").Inc()
	}
	if r.AlertmanagerURL != "" && o.AlertmanagerErr != nil {
		m.errors.WithLabelValues("alertmanager").Inc()
	}
}

// HealthGateReader reads what a health gate decides on (*gateread.Reader).
type HealthGateReader interface {
	Read(ctx context.Context, g healthgate.Gate) healthgate.Observation
}

// Gates is the health gates' state across passes (the policy's gate blocks:
// no drain of a group starts while a gate guarding it is closed; a gate that
// cannot be read is closed). Used by the pass's goroutine only.
type Gates struct {
	reader  HealthGateReader
	log     *slog.Logger
	metrics gateMetrics
	// logged: each gate's reason last logged ("" : open), so that a gate is
	// logged when it closes, changes and opens, not at every pass.
	logged map[string]string
}

// NewGates returns the health gates' state, reading with reader (nil: over
// HTTP alone, package gateread) and registering its series in reg.
func NewGates(reader HealthGateReader, reg prometheus.Registerer, log *slog.Logger) *Gates {
	if reader == nil {
		reader = &gateread.Reader{}
	}
	return &Gates{reader: reader, log: log, metrics: newGateMetrics(reg), logged: map[string]string{}}
}

// Read reads and decides every gate, side by side.
func (g *Gates) Read(ctx context.Context, gates []healthgate.Gate) map[string]healthgate.Verdict {
	verdicts := make([]healthgate.Verdict, len(gates))
	var wg sync.WaitGroup
	for i, gate := range gates {
		wg.Go(func() {
			o := g.reader.Read(ctx, gate)
			if o.Err != nil {
				g.metrics.errors.WithLabelValues(gate.Name).Inc()
			}
			verdicts[i] = healthgate.Decide(gate, o)
		})
	}
	wg.Wait()
	out := make(map[string]healthgate.Verdict, len(gates))
	g.metrics.open.Reset()
	for i, gate := range gates {
		v := verdicts[i]
		out[gate.Name] = v
		open := 0.0
		if v.Open {
			open = 1
		}
		g.metrics.open.WithLabelValues(gate.Name).Set(open)
		if g.logged[gate.Name] == v.Reason {
			continue
		}
		if v.Open {
			g.log.Info("health gate open", "gate", gate.Name)
		} else {
			g.log.Info("health gate closed: drains it guards wait", "gate", gate.Name, "reason", v.Reason, "recheck", gate.Recheck)
		}
		g.logged[gate.Name] = v.Reason
	}
	return out
}

// gateMetrics are the health gates' series.
type gateMetrics struct {
	open   *prometheus.GaugeVec
	errors *prometheus.CounterVec
}

func newGateMetrics(reg prometheus.Registerer) gateMetrics {
	return gateMetrics{
		open: telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rollboot_health_gate_open",
			Help: "1 while the health gate (by name) was open when last read, 0 while it holds the drains it guards; read only while some host waits to start."}, []string{"gate"})),
		errors: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_health_gate_read_errors_total",
			Help: "Reads of a health gate (by name) that failed: the gate is closed until a read succeeds."}, []string{"gate"})),
	}
}

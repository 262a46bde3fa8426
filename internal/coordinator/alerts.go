package coordinator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/alertread"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// The alert gate: no new drain starts while alerts fire (policy block alerts,
// decided by package alertgate). The alerts are read only in a pass with a host
// in the admission queue, so an idle cluster costs nothing. Prometheus and
// Alertmanager have nothing to watch: while the gate holds, a pass is due every
// Rules.Recheck (wake.go), which is how a held rollout sees the alerts resolve.

// AlertReader reads the alerts of the sources rules name. Each source that
// cannot be read reports its error in the observation; an error never shows
// the credentials of a URL.
type AlertReader interface {
	ReadAlerts(ctx context.Context, rules alertgate.Rules) alertgate.Observation
}

// alertState is the gate's state across passes.
type alertState struct {
	reader  AlertReader
	metrics *alertMetrics
	// logged is the hold last logged ("" : none), so that a hold is logged
	// when it starts, changes and ends, not at every pass.
	logged string
	// next: when a held rollout asks again (zero: it is not held).
	next time.Time
}

// readAlerts reads the alerts, when admission asks for them (the gate is on
// and some host waits to start), and decides what they mean into the
// snapshot. It does it once per snapshot.
func (c *Coordinator) readAlerts(ctx context.Context, s *snapshot) {
	r := c.opt.Alerts
	if s.alerts != nil {
		return
	}
	reader := c.alerts.reader
	if reader == nil {
		reader = &alertread.HTTP{}
		c.alerts.reader = reader
	}
	obs := reader.ReadAlerts(ctx, r)
	v := alertgate.Decide(r, obs)
	s.alerts = &v
	c.alerts.metrics.observed(r, obs, v)
	c.alerts.next = time.Time{}
	if v.Holds() {
		c.alerts.next = s.now.Add(r.Recheck)
	}
	held := admission.AlertHold(v).String()
	if held == c.alerts.logged {
		return
	}
	switch {
	case v.Unknown != "":
		c.log.Warn("no new drain starts: cannot tell whether alerts fire", "err", v.Unknown, "recheck", r.Recheck)
	case v.Holds():
		c.log.Info("no new drain starts while alerts fire", "alerts", v.Names(), "recheck", r.Recheck)
	default:
		c.log.Info("no alert holds new drains any more")
	}
	c.alerts.logged = held
}

// noAlertsRead is the gate's state after a pass that did not read the alerts
// (off, or no host waits to start): nothing is held, nothing is due.
func (c *Coordinator) noAlertsRead() {
	c.alerts.next = time.Time{}
	if m := c.alerts.metrics; m != nil { // nil: a coordinator not made by New (tests)
		m.blocking.Set(0)
	}
}

// alertMetrics are the gate's series.
type alertMetrics struct {
	blocking prometheus.Gauge
	errors   *prometheus.CounterVec
}

func newAlertMetrics(reg prometheus.Registerer) *alertMetrics {
	m := &alertMetrics{
		blocking: telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "rollboot_alerts_blocking",
			Help: "Alerts (by name) holding every new drain in the last pass; 0 when no host waits to start (the alerts are not read then)."})),
		errors: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_alerts_query_errors_total",
			Help: "Reads of the alerts that failed, by source (prometheus, alertmanager): new drains wait."}, []string{"source"})),
	}
	m.errors.WithLabelValues("prometheus")
	m.errors.WithLabelValues("alertmanager")
	return m
}

func (m *alertMetrics) observed(r alertgate.Rules, o alertgate.Observation, v alertgate.Verdict) {
	m.blocking.Set(float64(len(v.Blocking)))
	if r.PrometheusURL != "" && o.PrometheusErr != nil {
		m.errors.WithLabelValues("prometheus").Inc()
	}
	if r.AlertmanagerURL != "" && o.AlertmanagerErr != nil {
		m.errors.WithLabelValues("alertmanager").Inc()
	}
}

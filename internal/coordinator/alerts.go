package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
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

// readAlerts reads the alerts when the gate is on and some host waits to start
// (the admission queue is not empty), and decides what they mean into the
// snapshot. It does it once per snapshot.
func (c *Coordinator) readAlerts(ctx context.Context, s *snapshot) {
	r := c.opt.Alerts
	if s.alerts != nil {
		return
	}
	if !r.Enabled() || len(admissionQueue(s)) == 0 {
		c.alerts.next = time.Time{}
		c.alerts.metrics.blocking.Set(0) // nothing is held
		return
	}
	reader := c.alerts.reader
	if reader == nil {
		reader = &httpAlertReader{}
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
	held := alertHoldReason(v).String()
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

// alertHoldReason is why the verdict holds every new start (zero: it does not).
func alertHoldReason(v alertgate.Verdict) phase.WaitReason {
	switch {
	case v.Unknown != "" && len(v.Blocking) > 0:
		return phase.WaitFor(phase.WaitAlertsUnknown, fmt.Sprintf("%s (and firing: %s)", v.Unknown, v.Names()))
	case v.Unknown != "":
		return phase.WaitFor(phase.WaitAlertsUnknown, v.Unknown)
	case len(v.Blocking) > 0:
		return phase.WaitFor(phase.WaitAlerts, v.Names())
	}
	return phase.WaitReason{}
}

// holdForAlerts takes every host out of the admission queue while alerts hold
// (fleet-wide), with why it waits.
func holdForAlerts(s *snapshot, queue []policy.Request, wait map[string]phase.WaitReason) []policy.Request {
	if s.alerts == nil {
		return queue
	}
	why := alertHoldReason(*s.alerts)
	if why.IsZero() {
		return queue
	}
	for _, req := range queue {
		wait[req.Host] = why
	}
	return nil
}

// httpAlertReader asks Prometheus (its v1 HTTP API) and Alertmanager (its v2 API)
// over HTTP.
type httpAlertReader struct {
	hc *http.Client
}

// ReadAlerts implements AlertReader.
func (h *httpAlertReader) ReadAlerts(ctx context.Context, r alertgate.Rules) alertgate.Observation {
	if h.hc == nil {
		h.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	var o alertgate.Observation
	if r.PrometheusURL != "" {
		o.Prometheus, o.PrometheusErr = h.prometheus(ctx, r)
		o.PrometheusErr = scrubURL(o.PrometheusErr, r.PrometheusURL)
	}
	if r.AlertmanagerURL != "" {
		o.Alertmanager, o.AlertmanagerErr = h.alertmanager(ctx, r)
		o.AlertmanagerErr = scrubURL(o.AlertmanagerErr, r.AlertmanagerURL)
	}
	return o
}

// promAnswer is the part of Prometheus's answer to GET /api/v1/alerts that the
// gate reads: the envelope of every HTTP API answer (prometheus
// web/api/v1/api.go Response: status, errorType, error, data) and, in its data,
// each alert's labels and state (rules/alerting.go Alert, "pending" or
// "firing").
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	} `json:"data"`
}

// prometheus reads Prometheus's active alerts: GET /api/v1/alerts, the alerts
// of every alerting rule that are pending or firing (prometheus
// web/api/v1/api.go alerts, rules/alerting.go ActiveAlerts). A plain request,
// not Prometheus's Go API client: the client's JSON library registers itself
// at start in every rollboot process, agents included (docs/performance.md).
func (h *httpAlertReader) prometheus(ctx context.Context, r alertgate.Rules) ([]alertgate.Alert, error) {
	u, err := url.Parse(r.PrometheusURL)
	if err != nil {
		return nil, errors.New("invalid URL")
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	body, status, err := h.get(ctx, u.JoinPath("api", "v1", "alerts"))
	if err != nil {
		return nil, err
	}
	var a promAnswer
	jsonErr := json.Unmarshal(body, &a)
	switch {
	case a.Status == "error":
		// Prometheus's errors (4xx and 5xx, and a 2xx that says error) carry
		// their type and text: web/api/v1/api.go respondError.
		return nil, fmt.Errorf("HTTP %d: %s: %s", status, a.ErrorType, a.Error)
	case status/100 != 2:
		return nil, fmt.Errorf("HTTP %d: %s", status, firstLine(body))
	case jsonErr != nil:
		return nil, fmt.Errorf("decode the alerts: %w", jsonErr)
	case a.Status != "success":
		return nil, fmt.Errorf("decode the alerts: status %q, want success", a.Status)
	}
	out := make([]alertgate.Alert, 0, len(a.Data.Alerts))
	for _, al := range a.Data.Alerts {
		out = append(out, alertgate.Alert{Labels: al.Labels, State: al.State})
	}
	return out, nil
}

// amAlert is the part of Alertmanager's gettableAlert that the gate reads
// (alertmanager api/v2/openapi.yaml, definitions gettableAlert and
// alertStatus).
type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		// "active", "suppressed" (silenced or inhibited) or "unprocessed"
		// (types/types.go AlertState).
		State string `json:"state"`
	} `json:"status"`
}

// maxAlertsBody bounds the answer read from Prometheus or Alertmanager.
const maxAlertsBody = 32 << 20

// get sends GET u, asking for JSON, and returns the answer's body (at most
// maxAlertsBody) and status code.
func (h *httpAlertReader) get(ctx context.Context, u *url.URL) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAlertsBody))
	if err != nil {
		return nil, 0, fmt.Errorf("read the answer: %w", err)
	}
	return body, resp.StatusCode, nil
}

// alertmanager reads Alertmanager's alerts: GET /api/v2/alerts with every
// state asked for (api/v2/api.go getAlertsHandler filters on the active,
// silenced, inhibited and unprocessed parameters; all default to true, given
// here all the same), so that a silenced alert Prometheus also reports is
// known as silenced.
func (h *httpAlertReader) alertmanager(ctx context.Context, r alertgate.Rules) ([]alertgate.ManagedAlert, error) {
	u, err := url.Parse(r.AlertmanagerURL)
	if err != nil {
		return nil, errors.New("invalid URL")
	}
	u = u.JoinPath("api", "v2", "alerts")
	u.RawQuery = url.Values{"active": {"true"}, "silenced": {"true"}, "inhibited": {"true"}, "unprocessed": {"true"}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	body, status, err := h.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", status, firstLine(body))
	}
	var alerts []amAlert
	if err := json.Unmarshal(body, &alerts); err != nil {
		return nil, fmt.Errorf("decode the alerts: %w", err)
	}
	out := make([]alertgate.ManagedAlert, 0, len(alerts))
	for _, a := range alerts {
		out = append(out, alertgate.ManagedAlert{Labels: a.Labels, Suppressed: a.Status.State == "suppressed"})
	}
	return out, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// scrubURL returns err without the request URL net/http puts in it (*url.Error),
// and with any credentials of rawURL masked: the reason shows the URL itself,
// without them (alertgate.RedactURL).
func scrubURL(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	unreachable := false
	var ue *url.Error
	if errors.As(err, &ue) {
		err, unreachable = ue.Err, true // the request got no answer
	}
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
		if name := u.User.Username(); name != "" {
			msg = strings.ReplaceAll(msg, name, "xxxxx")
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "no answer in time (alerts.timeout)"
	case unreachable:
		msg = "unreachable: " + msg
	}
	return errors.New(msg)
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

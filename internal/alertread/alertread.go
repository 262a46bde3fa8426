// Package alertread reads what the alert gate decides on (package alertgate)
// from Prometheus and Alertmanager over HTTP.
package alertread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/httpcall"
)

// HTTP asks Prometheus (its v1 HTTP API) and Alertmanager (its v2 API)
// over HTTP. Its zero value is ready to use.
type HTTP struct {
	hc *http.Client
}

// ReadAlerts reads the alerts that r names, and what fails to be read.
func (h *HTTP) ReadAlerts(ctx context.Context, r alertgate.Rules) alertgate.Observation {
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
func (h *HTTP) prometheus(ctx context.Context, r alertgate.Rules) ([]alertgate.Alert, error) {
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
		return nil, fmt.Errorf("HTTP %d: %s", status, httpcall.FirstLine(body))
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

// get sends GET u, asking for JSON, and returns the answer's body (at most
// maxAlertsBody) and status code.
func (h *HTTP) get(ctx context.Context, u *url.URL) ([]byte, int, error) {
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
func (h *HTTP) alertmanager(ctx context.Context, r alertgate.Rules) ([]alertgate.ManagedAlert, error) {
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
		return nil, fmt.Errorf("HTTP %d: %s", status, httpcall.FirstLine(body))
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

// scrubURL returns err without the request URL net/http puts in it (*url.Error),
// and with any credentials of rawURL masked: the reason shows the URL itself,
// without them (alertgate.RedactURL).
func scrubURL(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	unreachable := false
	if inner := httpcall.Unwrapped(err); inner != err {
		err, unreachable = inner, true // the request got no answer
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

// maxAlertsBody bounds the answer read from Prometheus or Alertmanager.
const maxAlertsBody = 32 << 20

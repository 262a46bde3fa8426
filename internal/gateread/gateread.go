// Package gateread reads what the health gates decide on (package
// healthgate): Prometheus's HTTP API, Alertmanager's v2 API, Consul's health
// API, Nomad's job allocations and plain HTTP checks.
package gateread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/httpcall"
)

// ConsulServices is the part of Consul's health API a consul_service gate
// reads; *consulapi.Health implements it.
type ConsulServices interface {
	Service(service, tag string, passingOnly bool, q *consulapi.QueryOptions) ([]*consulapi.ServiceEntry, *consulapi.QueryMeta, error)
}

// NomadJobs is the part of Nomad's jobs API a nomad_job gate reads;
// *api.Jobs implements it.
type NomadJobs interface {
	Allocations(jobID string, allAllocs bool, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error)
}

// Reader reads the gates. Consul and Nomad may be nil: their gates then stay
// closed, saying so.
type Reader struct {
	Consul ConsulServices
	Nomad  NomadJobs
	hc     *http.Client
}

// maxBody bounds an answer read.
const maxBody = 4 << 20

// Read reads what gate g decides on, within its timeout.
func (r *Reader) Read(ctx context.Context, g healthgate.Gate) healthgate.Observation {
	if r.hc == nil {
		r.hc = httpcall.NoRedirects()
	}
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	var o healthgate.Observation
	switch g.Kind {
	case healthgate.KindPromQL:
		o.Samples, o.Err = r.promql(ctx, g)
	case healthgate.KindAlerts:
		o.Alerts, o.Err = r.alerts(ctx, g)
	case healthgate.KindConsulService:
		o.Passing, o.Err = r.consul(ctx, g)
	case healthgate.KindNomadJob:
		o.Healthy, o.Allocs, o.Err = r.nomad(ctx, g)
	case healthgate.KindHTTP:
		o.Status, o.Err = r.check(ctx, g.URL)
	default:
		o.Err = fmt.Errorf("unknown kind %q", g.Kind)
	}
	return o
}

// promAnswer is Prometheus's answer to an instant query (prometheus
// web/api/v1/api.go Response and queryData): a vector's samples carry their
// labels and [time, "value"], a scalar is [time, "value"].
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// promql asks Prometheus the gate's query: GET /api/v1/query (prometheus
// web/api/v1/api.go query).
func (r *Reader) promql(ctx context.Context, g healthgate.Gate) ([]healthgate.Sample, error) {
	u, err := url.Parse(g.PrometheusURL)
	if err != nil {
		return nil, errors.New("invalid Prometheus URL")
	}
	u = u.JoinPath("api", "v1", "query")
	u.RawQuery = url.Values{"query": {g.Query}}.Encode()
	body, status, err := r.get(ctx, u.String())
	if err != nil {
		return nil, err
	}
	var a promAnswer
	jsonErr := json.Unmarshal(body, &a)
	switch {
	case a.Status == "error":
		return nil, fmt.Errorf("Prometheus: HTTP %d: %s: %s", status, a.ErrorType, a.Error)
	case status != http.StatusOK:
		return nil, fmt.Errorf("Prometheus: HTTP %d: %s", status, httpcall.FirstLine(body))
	case jsonErr != nil:
		return nil, fmt.Errorf("Prometheus: decode the answer: %v", jsonErr)
	}
	return promSamples(a.Data.ResultType, a.Data.Result)
}

// promSamples decodes an instant query's result.
func promSamples(typ string, raw json.RawMessage) ([]healthgate.Sample, error) {
	switch typ {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(raw, &vec); err != nil {
			return nil, fmt.Errorf("Prometheus: decode the vector: %v", err)
		}
		out := make([]healthgate.Sample, 0, len(vec))
		for _, s := range vec {
			v, err := promValue(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, healthgate.Sample{Labels: s.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var pair [2]any
		if err := json.Unmarshal(raw, &pair); err != nil {
			return nil, fmt.Errorf("Prometheus: decode the scalar: %v", err)
		}
		v, err := promValue(pair)
		if err != nil {
			return nil, err
		}
		return []healthgate.Sample{{Value: v}}, nil
	}
	return nil, fmt.Errorf("Prometheus: the query returns a %s: a gate needs a vector or a scalar", typ)
}

func promValue(pair [2]any) (float64, error) {
	s, ok := pair[1].(string)
	if !ok {
		return 0, errors.New("Prometheus: a sample's value is not a string")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("Prometheus: a sample's value %q: %v", s, err)
	}
	return v, nil
}

// alerts asks Alertmanager for its active alerts matching the gate's
// matchers: GET /api/v2/alerts with a filter per matcher, silenced and
// inhibited alerts left out (alertmanager api/v2/api.go getAlertsHandler).
func (r *Reader) alerts(ctx context.Context, g healthgate.Gate) ([]string, error) {
	u, err := url.Parse(g.AlertmanagerURL)
	if err != nil {
		return nil, errors.New("invalid Alertmanager URL")
	}
	u = u.JoinPath("api", "v2", "alerts")
	u.RawQuery = url.Values{"filter": g.Matchers, "active": {"true"}, "silenced": {"false"},
		"inhibited": {"false"}, "unprocessed": {"true"}}.Encode()
	body, status, err := r.get(ctx, u.String())
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("Alertmanager: HTTP %d: %s", status, httpcall.FirstLine(body))
	}
	var alerts []struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(body, &alerts); err != nil {
		return nil, fmt.Errorf("Alertmanager: decode the alerts: %v", err)
	}
	names := make([]string, 0, len(alerts))
	for _, a := range alerts {
		names = append(names, a.Labels["alertname"])
	}
	return names, nil
}

// consul counts the service's passing instances (Consul's
// /v1/health/service/:service?passing).
func (r *Reader) consul(ctx context.Context, g healthgate.Gate) (int, error) {
	if r.Consul == nil {
		return 0, errors.New("no Consul client configured (CONSUL_HTTP_ADDR)")
	}
	entries, _, err := r.Consul.Service(g.Service, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("Consul: %w", err)
	}
	return len(entries), nil
}

// nomad counts the job's running allocations and those of them healthy: a
// deployment's allocation once its deployment says it is healthy, any other
// running one (nomad/structs AllocDeploymentStatus.IsHealthy).
func (r *Reader) nomad(ctx context.Context, g healthgate.Gate) (int, int, error) {
	if r.Nomad == nil {
		return 0, 0, errors.New("no Nomad client")
	}
	allocs, _, err := r.Nomad.Allocations(g.Job, false, (&api.QueryOptions{Namespace: g.Namespace}).WithContext(ctx))
	if err != nil {
		return 0, 0, fmt.Errorf("Nomad: %w", err)
	}
	healthy, running := 0, 0
	for _, a := range allocs {
		if a.ClientStatus != api.AllocClientStatusRunning || a.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		running++
		if ds := a.DeploymentStatus; ds == nil || ds.Healthy == nil || *ds.Healthy {
			healthy++
		}
	}
	return healthy, running, nil
}

// check sends GET u and returns the answer's status code (redirects not
// followed).
func (r *Reader) check(ctx context.Context, u string) (int, error) {
	_, status, err := r.get(ctx, u)
	return status, err
}

// get sends GET u; an error never shows the URL's credentials.
func (r *Reader) get(ctx context.Context, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, errors.New("invalid URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: unreachable: %v", httpcall.Redacted(u), httpcall.Unwrapped(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read the answer: %v", httpcall.Redacted(u), err)
	}
	return body, resp.StatusCode, nil
}

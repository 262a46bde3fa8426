package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The requests sent to Nomad by every client of the process. They are one set
// for the process (NewRegistry registers them), since a process builds its Nomad
// clients in several places.
var (
	nomadDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rollboot_nomad_request_duration_seconds",
		Help:    "Duration of requests to the Nomad API, blocking queries included, by method and endpoint.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"method", "endpoint"})
	nomadErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollboot_nomad_request_errors_total",
		Help: "Failed requests to the Nomad API, by endpoint and kind (transport, timeout, 4xx, 5xx).",
	}, []string{"endpoint", "kind"})
)

// NomadTransport measures every request rt sends to Nomad.
func NomadTransport(rt http.RoundTripper) http.RoundTripper {
	return nomadTransport{rt}
}

type nomadTransport struct{ next http.RoundTripper }

func (t nomadTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ep := Endpoint(r.URL.Path)
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	nomadDuration.WithLabelValues(r.Method, ep).Observe(time.Since(start).Seconds())
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		nomadErrors.WithLabelValues(ep, "timeout").Inc()
	case err != nil:
		nomadErrors.WithLabelValues(ep, "transport").Inc()
	case resp.StatusCode >= 500:
		nomadErrors.WithLabelValues(ep, "5xx").Inc()
	case resp.StatusCode >= 400:
		nomadErrors.WithLabelValues(ep, "4xx").Inc()
	}
	return resp, err
}

// Endpoint is the route of a Nomad API path, a bounded label: the first two
// segments ("/v1/var", "/v1/node", "/v1/operator"), and for the routes of one
// object the ":id" placeholder with the action after it ("/v1/node/:id/drain").
// No id, variable path or query is ever part of it.
func Endpoint(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	if len(seg) < 2 || seg[0] != "v1" {
		return "other"
	}
	base := "/v1/" + seg[1]
	switch seg[1] {
	case "node", "job", "allocation", "evaluation", "deployment":
		switch len(seg) {
		case 2:
			return base
		case 3:
			return base + "/:id"
		default:
			return base + "/:id/" + seg[3]
		}
	case "operator", "agent", "status":
		if len(seg) > 2 {
			return base + "/" + seg[2]
		}
	}
	return base
}

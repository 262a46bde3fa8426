package alertread

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
)

// The HTTP reader asks Prometheus's /api/v1/alerts and Alertmanager's
// /api/v2/alerts, and never shows a URL's credentials in an error.
func TestHTTPAlertReader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/alerts":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"success","data":{"alerts":[{"labels":{"alertname":"NodeDown"},"state":"firing","activeAt":"2026-12-02T10:00:00Z","value":"1"},{"labels":{"alertname":"HighLoad"},"state":"pending","activeAt":"2026-12-02T10:00:00Z","value":"1"}]}}`))
		case "/am/api/v2/alerts":
			if q := r.URL.Query(); q.Get("silenced") != "true" || q.Get("inhibited") != "true" || q.Get("active") != "true" {
				http.Error(w, "wrong query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`[{"labels":{"alertname":"NodeDown"},"status":{"state":"suppressed","silencedBy":["s1"],"inhibitedBy":[]}},{"labels":{"alertname":"Other"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	r := alertgate.Rules{PrometheusURL: srv.URL, AlertmanagerURL: srv.URL + "/am", Timeout: 5 * time.Second}
	o := (&HTTP{}).ReadAlerts(context.Background(), r)
	if o.PrometheusErr != nil || o.AlertmanagerErr != nil {
		t.Fatalf("errors: %v, %v", o.PrometheusErr, o.AlertmanagerErr)
	}
	v := alertgate.Decide(r, o)
	if strings.Join(v.Blocking, ",") != "HighLoad,Other" {
		t.Errorf("blocking %v, want HighLoad (pending) and Other (NodeDown is silenced)", v.Blocking)
	}

	// Errors: an answer that is not one, and a server that is gone.
	bad := alertgate.Rules{PrometheusURL: "http://user:s3cret@" + strings.TrimPrefix(srv.URL, "http://") + "/nothing",
		AlertmanagerURL: "http://user:s3cret@" + strings.TrimPrefix(srv.URL, "http://") + "/nothing", Timeout: 5 * time.Second}
	o = (&HTTP{}).ReadAlerts(context.Background(), bad)
	if o.PrometheusErr == nil || o.AlertmanagerErr == nil || !strings.Contains(o.AlertmanagerErr.Error(), "HTTP 404") {
		t.Fatalf("errors: %v, %v", o.PrometheusErr, o.AlertmanagerErr)
	}
	srv.Close()
	o = (&HTTP{}).ReadAlerts(context.Background(), bad)
	for _, err := range []error{o.PrometheusErr, o.AlertmanagerErr} {
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "user") ||
			!strings.HasPrefix(err.Error(), "unreachable: ") {
			t.Errorf("error %v", err)
		}
	}
	if u := alertgate.Decide(bad, o).Unknown; strings.Contains(u, "s3cret") || strings.Contains(u, "user") {
		t.Errorf("reason shows credentials: %s", u)
	}
}

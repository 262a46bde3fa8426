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

// Prometheus's answers to GET /api/v1/alerts, read without its Go client: the
// alerts of a success, and for anything else an error that says what
// Prometheus answered (its error type and text when it gives them).
func TestPrometheusAlertAnswers(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		body    string
		want    []alertgate.Alert
		wantErr string
	}{
		{name: "alerts", code: 200,
			body: `{"status":"success","data":{"alerts":[{"labels":{"alertname":"NodeDown","severity":"page"},"annotations":{},"state":"firing","activeAt":"2026-12-02T10:00:00Z","value":"1e+00"}]}}`,
			want: []alertgate.Alert{{Labels: map[string]string{"alertname": "NodeDown", "severity": "page"}, State: "firing"}}},
		{name: "no alerts", code: 200, body: `{"status":"success","data":{"alerts":[]}}`, want: []alertgate.Alert{}},
		{name: "an API error", code: 422, body: `{"status":"error","errorType":"execution","error":"query timed out"}`,
			wantErr: "HTTP 422: execution: query timed out"},
		{name: "a success code that says error", code: 200, body: `{"status":"error","errorType":"internal","error":"boom"}`,
			wantErr: "HTTP 200: internal: boom"},
		{name: "a proxy's error page", code: 502, body: "<html>Bad Gateway</html>\nmore", wantErr: "HTTP 502: <html>Bad Gateway</html>"},
		{name: "not JSON", code: 200, body: "alerts: none", wantErr: "decode the alerts: "},
		{name: "no status", code: 200, body: `{"data":{"alerts":[]}}`, wantErr: `decode the alerts: status "", want success`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/prom/api/v1/alerts" || r.Method != http.MethodGet {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
					return
				}
				w.WriteHeader(tt.code)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			r := alertgate.Rules{PrometheusURL: srv.URL + "/prom", Timeout: 5 * time.Second}
			o := (&HTTP{}).ReadAlerts(context.Background(), r)
			if tt.wantErr != "" {
				if o.PrometheusErr == nil || !strings.HasPrefix(o.PrometheusErr.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one starting %q", o.PrometheusErr, tt.wantErr)
				}
				return
			}
			if o.PrometheusErr != nil {
				t.Fatal(o.PrometheusErr)
			}
			if len(o.Prometheus) != len(tt.want) {
				t.Fatalf("alerts %+v, want %+v", o.Prometheus, tt.want)
			}
			for i, a := range o.Prometheus {
				w := tt.want[i]
				if a.State != w.State || len(a.Labels) != len(w.Labels) || a.Labels["alertname"] != w.Labels["alertname"] || a.Labels["severity"] != w.Labels["severity"] {
					t.Errorf("alert %d: %+v, want %+v", i, a, w)
				}
			}
		})
	}
}

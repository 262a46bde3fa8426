package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEndpoint(t *testing.T) {
	tests := []struct{ name, path, want string }{
		{"variable", "/v1/var/rollboot/hosts/web-1", "/v1/var"},
		{"variables", "/v1/vars", "/v1/vars"},
		{"node list", "/v1/nodes", "/v1/nodes"},
		{"one node", "/v1/node/0b5d1c1e-aaaa-bbbb-cccc-0123456789ab", "/v1/node/:id"},
		{"node drain", "/v1/node/0b5d1c1e-aaaa/drain", "/v1/node/:id/drain"},
		{"node allocations", "/v1/node/0b5d1c1e-aaaa/allocations", "/v1/node/:id/allocations"},
		{"job allocations", "/v1/job/rollboot/allocations", "/v1/job/:id/allocations"},
		{"raft", "/v1/operator/raft/configuration", "/v1/operator/raft"},
		{"agent self", "/v1/agent/self", "/v1/agent/self"},
		{"not the API", "/ui/", "other"},
		{"root", "/", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Endpoint(tt.path); got != tt.want {
				t.Errorf("Endpoint(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNomadTransportCountsErrors(t *testing.T) {
	status := http.StatusOK
	var fail error
	rt := NomadTransport(roundTripper(func(r *http.Request) (*http.Response, error) {
		if fail != nil {
			return nil, fail
		}
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}))
	send := func() {
		req := httptest.NewRequest(http.MethodGet, "http://nomad:4646/v1/node/abc/drain?token=x", nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			_ = resp.Body.Close()
		}
	}
	errs := func(kind string) float64 {
		return testutil.ToFloat64(nomadErrors.WithLabelValues("/v1/node/:id/drain", kind))
	}
	base := map[string]float64{"5xx": errs("5xx"), "4xx": errs("4xx"), "timeout": errs("timeout"), "transport": errs("transport")}
	before := testutil.CollectAndCount(nomadDuration)
	send()
	status = http.StatusInternalServerError
	send()
	status = http.StatusForbidden
	send()
	fail = context.DeadlineExceeded
	send()
	fail = errors.New("connection refused")
	send()
	for kind, n := range base {
		if got := errs(kind); got != n+1 {
			t.Errorf("errors %s = %v, want %v", kind, got, n+1)
		}
	}
	if got := testutil.CollectAndCount(nomadDuration); got > before+1 {
		t.Errorf("%d duration series added for one method and endpoint", got-before)
	}
}

func TestServeMetrics(t *testing.T) {
	reg := NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "rollboot_test_total", Help: "A test counter."}))
	body := scrape(t, reg)
	for _, want := range []string{"rollboot_test_total 0", "go_goroutines", "# TYPE rollboot_nomad_request_duration_seconds histogram"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// scrape serves reg on a real listener and returns one scrape of /metrics.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, reg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + ln.Addr().String() + Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus): rules and metrics not checked")
	}
	return p
}

// The example alert rules are valid.
func TestAlertRules(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	rules := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "prometheus", "rollboot.rules.yml")
	out, err := exec.Command(promtool(t), "check", "rules", rules).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// A real scrape follows Prometheus's naming rules (promtool check metrics lints
// names, units, _total and help texts).
func TestScrapePassesPromtool(t *testing.T) {
	p := promtool(t)
	reg := NewRegistry()
	NomadTransport(roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 500, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})).RoundTrip(httptest.NewRequest(http.MethodGet, "http://nomad/v1/nodes", nil))
	cmd := exec.Command(p, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape(t, reg))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Fatalf("promtool check metrics:\n%s", out)
	}
}

// RollbootDecisionsNotSettling fires once the coordinator cut a chain of
// passes as a spin, and clears 30 minutes after the last one (promtool test
// rules, on series written here).
func TestAlertRuleDecisionsNotSettling(t *testing.T) {
	p := promtool(t)
	_, file, _, _ := runtime.Caller(0)
	rules, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "prometheus", "rollboot.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const alert = `        alertname: RollbootDecisionsNotSettling
`
	firing := `        exp_alerts:
          - exp_labels:
              severity: warning
            exp_annotations:
              summary: "The rollboot coordinator's decisions keep changing with nothing else changing"
              description: "20 passes in a row changed something while no host, node or control change came in: a decision that does not settle. The coordinator waits for a change, a timer or the resync before the next pass; its log has the warning. Report it with that log."
`
	test := `rule_files:
  - ` + rules + `
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'rollboot_coordinator_pass_spins_total{instance="coordinator-1"}'
        values: '0x20 1x60'
    alert_rule_test:
      - eval_time: 15m
` + alert + `        exp_alerts: []
      - eval_time: 30m
` + alert + firing + `      - eval_time: 70m
` + alert + `        exp_alerts: []
`
	path := filepath.Join(t.TempDir(), "rules_test.yml")
	if err := os.WriteFile(path, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

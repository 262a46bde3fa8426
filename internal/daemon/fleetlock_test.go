package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rollboot/rollboot/internal/config"
)

// An agent publishes its FleetLock id only when told to: a published id lets
// FleetLock clients ask for this host's reboot.
func TestAgentFleetLockID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "machine-id")
	if err := os.WriteFile(p, []byte("3d1219c7c4c5404aaa1f6d2a48adfda4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name    string
		publish bool
		file    string
		want    string
	}{
		{"default: not published", false, p, ""},
		{"published", true, p, "975228d46dc94622b9bbe16671e2b58d"},
		{"published, no file", true, filepath.Join(t.TempDir(), "missing"), ""},
		{"published, disabled file", true, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ac := config.Default().Agent
			ac.MachineIDFile, ac.PublishFleetLockID = tt.file, tt.publish
			if got := AgentFleetLockID(ac, log); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if config.Default().Agent.PublishFleetLockID {
		t.Fatal("agents publish their FleetLock id by default")
	}
}

func TestClientCertIDNeedsClientCA(t *testing.T) {
	fc := config.Default().FleetLock
	if got := clientCertID(fc); got != "none" {
		t.Fatalf("without client_ca: %q", got)
	}
	fc.ClientCA = "/ca.pem"
	if got := clientCertID(fc); got != "san_or_cn" {
		t.Fatalf("with client_ca: %q", got)
	}
}

// The FleetLock listener serves /metrics only when fleetlock.serve_metrics asks.
func TestFleetLockServesMetricsOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		want bool
	}{
		{"default", "", false},
		{"asked", "fleetlock {\n  serve_metrics = true\n}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.LoadBytes([]byte(tt.src), "test.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := fleetLockOptions(cfg, nil, nil, slog.New(slog.DiscardHandler)).ServeMetrics; got != tt.want {
				t.Fatalf("ServeMetrics = %v, want %v", got, tt.want)
			}
		})
	}
}

package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/telemetry"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// With FleetLock off, the telemetry listener serves the process's metrics: the
// coordinator's among them.
func TestTelemetryServesMetricsWithFleetLockOff(t *testing.T) {
	c := config.Default()
	c.Telemetry.Listen = freeAddr(t)
	cfg, err := config.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FleetLock.Enabled {
		t.Fatal("FleetLock is on by default")
	}
	err = WithTelemetry(context.Background(), cfg, slog.New(slog.DiscardHandler), func(ctx context.Context, reg *prometheus.Registry) error {
		coordinator.New(coordinator.Options{Runtime: coordinator.Runtime{Registry: reg}})
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		// A request vector has no series before its first request: send one
		// through the measured transport, as every Nomad client of the process
		// does, so that the test holds alone and not only after other tests.
		nc := &http.Client{Transport: telemetry.NomadTransport(&http.Transport{DisableKeepAlives: true})}
		if resp, err := nc.Get("http://" + cfg.Telemetry.Listen + "/v1/status/leader"); err == nil {
			resp.Body.Close()
		}
		resp, err := hc.Get("http://" + cfg.Telemetry.Listen + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for _, want := range []string{"rollboot_coordinator_pass_duration_seconds", "rollboot_leader 0", "rollboot_nomad_request_duration_seconds"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A listen address that cannot be opened fails at start, before run.
func TestTelemetryBadAddressFailsAtStart(t *testing.T) {
	c := config.Default()
	c.Telemetry.Listen = "192.0.2.1:1" // not an address of this machine
	cfg, err := config.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = WithTelemetry(context.Background(), cfg, slog.New(slog.DiscardHandler), func(context.Context, *prometheus.Registry) error {
		ran = true
		return nil
	})
	if err == nil || ran {
		t.Fatalf("err %v, ran %v: want a failure before run", err, ran)
	}
}

// A coordinator candidate serves the status page beside /metrics (read-only);
// a process that is no candidate does not.
func TestTelemetryServesStatusPageOnCandidates(t *testing.T) {
	for _, candidate := range []bool{true, false} {
		c := config.Default()
		c.Telemetry.Listen = freeAddr(t)
		c.Coordinator.Enabled = candidate
		cfg, err := config.Compile(c)
		if err != nil {
			t.Fatal(err)
		}
		err = WithTelemetry(context.Background(), cfg, slog.New(slog.DiscardHandler), func(ctx context.Context, reg *prometheus.Registry) error {
			hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := hc.Get("http://" + cfg.Telemetry.Listen + "/")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served := resp.StatusCode == http.StatusOK && strings.Contains(string(b), "rollboot status")
			if served != candidate {
				t.Errorf("candidate %v: GET / = %d, page served %v", candidate, resp.StatusCode, served)
			}
			resp, err = hc.Post("http://"+cfg.Telemetry.Listen+"/api/status", "application/json", strings.NewReader("{}"))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if candidate && resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST /api/status = %d, want 405", resp.StatusCode)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

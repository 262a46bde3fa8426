package nomadsim

import (
	"testing"
	"time"
)

// Every Nomad, Consul and Vault request waits the request latency before it is
// answered; the control API does not. The wait is counted as latency, not as the
// emulator's busy time.
func TestRequestLatency(t *testing.T) {
	const latency = 300 * time.Millisecond
	s, c := newTestSim(t, Config{Servers: 1, ConsulServers: true, VaultServers: true})
	base := s.Address() + controlPrefix
	took := func(what string, call func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return time.Since(start)
	}

	var got map[string]string
	if code := ctl(t, "PUT", base+"latency", `{"latency":"300ms"}`, &got); code != 200 || got["latency"] != "300ms" {
		t.Fatalf("set latency: %d %v", code, got)
	}
	if s.RequestLatency() != latency {
		t.Fatalf("latency %v", s.RequestLatency())
	}
	s.ResetRequestStats()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"nomad", func() error { _, err := c.Status().Leader(); return err }},
		{"consul", func() error { _, err := ccClient(t, s.ConsulAddress()).Status().Leader(); return err }},
		{"vault", func() error { _, err := vlClient(t, s.VaultAddress(), "").Sys().Health(); return err }},
	} {
		if d := took(tc.name, tc.call); d < latency {
			t.Errorf("%s request answered after %v, want at least %v", tc.name, d, latency)
		}
	}
	if d := took("control", func() error { ctl(t, "GET", base+"hosts", "", nil); return nil }); d >= latency {
		t.Errorf("control request answered after %v: it waited the request latency", d)
	}
	st := s.RequestStats()
	if st.Requests != 1 || st.Latency < latency || st.Busy >= latency {
		t.Errorf("stats: %d requests, latency %v, busy %v; want 1, >= %v, < %v", st.Requests, st.Latency, st.Busy, latency, latency)
	}

	if code := ctl(t, "PUT", base+"latency?latency=0s", "", &got); code != 200 || got["latency"] != "0s" {
		t.Fatalf("clear latency: %d %v", code, got)
	}
	if code := ctl(t, "PUT", base+"latency?latency=-1s", "", &got); code != 400 {
		t.Fatalf("negative latency: %d %v", code, got)
	}
	if code := ctl(t, "PUT", base+"latency", `{"latency":"soon"}`, &got); code != 400 {
		t.Fatalf("bad latency: %d %v", code, got)
	}
}

// Config.RequestLatency applies from the start.
func TestRequestLatencyOption(t *testing.T) {
	const latency = 100 * time.Millisecond
	_, c := newTestSim(t, Config{Clients: 1, RequestLatency: latency})
	start := time.Now()
	if _, _, err := c.Nodes().List(nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < latency {
		t.Fatalf("answered after %v, want at least %v", d, latency)
	}
}

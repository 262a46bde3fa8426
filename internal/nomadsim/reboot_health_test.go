package nomadsim

import (
	"context"
	"testing"
	"time"
)

// A server host's reboot records the health of each of its clusters as autopilot saw
// it just before: all healthy with 3 servers (tolerance 1); a second server rebooted
// while the first is still down finds its clusters unhealthy with tolerance 0.
func TestRebootRecordsServerHealth(t *testing.T) {
	s, _ := newTestSim(t, Config{Servers: 3, ConsulServers: true, VaultServers: true, VaultAutoUnseal: true,
		BootTime: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Wait until every product has a leader and all servers are stable.
	if err := s.WaitFor(ctx, func(v *View) bool {
		return s.servers.Health().Healthy && s.consul.Raft().Leader() != nil && s.vault.Raft().Leader() != nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("server-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("server-2"); err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, e := range s.Events(0) {
		if e.Type == EventHostRebootStart {
			got = append(got, e.Details)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d reboot events", len(got))
	}
	for _, p := range []string{"nomad", "consul", "vault"} {
		if got[0][p+"_server"] != "true" || got[0][p+"_healthy"] != "true" || got[0][p+"_failure_tolerance"] != "1" {
			t.Errorf("first reboot, %s: %v", p, got[0])
		}
		if got[1][p+"_healthy"] != "false" || got[1][p+"_failure_tolerance"] != "0" {
			t.Errorf("second reboot, %s: %v", p, got[1])
		}
	}
}

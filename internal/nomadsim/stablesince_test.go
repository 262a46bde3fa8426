package nomadsim

import (
	"testing"
	"time"
)

// The same health change, as each product's API reports its StableSince: Nomad
// and Consul round it to the nearest second (Nomad command/agent/operator_endpoint.go
// and Consul agent/operator_endpoint.go OperatorServerHealth:
// StableSince.Round(time.Second)), so a change in the second half of a second is
// reported up to 500ms later than it happened, possibly in the future; Vault's
// autopilot state gives it to the nanosecond (vault/logical_system_raft.go
// handleStorageRaftAutopilotState, a time.Time). A reader that compares one
// product's StableSince with another's must allow for that.
func TestStableSincePrecisionPerProduct(t *testing.T) {
	// The three clusters elect their first leader when New returns, and every
	// server's StableSince is that election: start it in the second half of a
	// second.
	for f := time.Now().Nanosecond(); f < 550e6 || f > 800e6; f = time.Now().Nanosecond() {
		time.Sleep(time.Millisecond)
	}
	s := vtSim(t, Config{Servers: 3, ConsulServers: true, VaultServers: true})
	host := "server-2"

	st, err := vlClient(t, s.VaultAddress(), "root").Sys().RaftAutopilotState()
	if err != nil {
		t.Fatal(err)
	}
	vault, err := time.Parse(time.RFC3339Nano, st.Servers[host].StableSince)
	if err != nil {
		t.Fatal(err)
	}
	if vault.Nanosecond() < 500e6 {
		t.Skipf("the election was not in the second half of a second (vault stable_since %v)", vault)
	}
	_, nh := opHealth(t, vtClient(t, s, "", ""))
	h, _ := s.Host(host)
	nomad, ok := nomadHealthOf(nh, h.Server.ID)
	if !ok {
		t.Fatalf("nomad health lacks %s: %+v", host, nh)
	}
	ch, err := ccClient(t, s.ConsulAddress()).Operator().AutopilotServerHealth(nil)
	if err != nil {
		t.Fatal(err)
	}
	var consul time.Time
	for _, srv := range ch.Servers {
		if srv.Name == host {
			consul = srv.StableSince
		}
	}
	want := vault.Round(time.Second)
	for _, got := range []struct {
		product string
		at      time.Time
	}{{"nomad", nomad.StableSince}, {"consul", consul}} {
		if !got.at.Equal(want) || !got.at.After(vault) {
			t.Errorf("%s StableSince %v, want %v: vault's %v rounded to the second", got.product, got.at, want, vault)
		}
	}
}

package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFleetLockDefaults(t *testing.T) {
	c := Default()
	if c.FleetLock.Enabled || c.FleetLock.Listen != "127.0.0.1:7777" || c.FleetLock.MaxBodyBytes != 65536 || c.FleetLock.PathPrefix != "" ||
		len(c.FleetLock.AllowedIDs) != 0 || c.FleetLock.MaxNodelessSlots != 1 || c.FleetLock.RequestTimeout != 20*time.Second ||
		c.FleetLock.RateLimit != 20 || c.FleetLock.ClientCertID != "san_or_cn" || c.FleetLock.RecordGrace != time.Hour || c.Agent.PublishFleetLockID {
		t.Fatalf("defaults: %+v", c.FleetLock)
	}
	if c.Agent.MachineIDFile != "/etc/machine-id" {
		t.Fatalf("machine_id_file default %q", c.Agent.MachineIDFile)
	}
	if _, err := Compile(c); err != nil {
		t.Fatal(err)
	}
}

func TestFleetLockLoad(t *testing.T) {
	src := `fleetlock {
  enabled = true
  listen = ":7777"
  path_prefix = "/fleet_lock/"
  tls_cert = "/c.pem"
  tls_key = "/k.pem"
  client_ca = "/ca.pem"
  max_body_bytes = 1024
  allowed_ids = ["0123456789abcdef0123456789abcdef"]
  max_nodeless_slots = 2
  request_timeout = "5s"
  rate_limit = 3
  client_cert_id = "cn"
  record_grace = "10m"
}
agent {
  machine_id_file = ""
  publish_fleetlock_id = true
}
`
	c, err := LoadBytes([]byte(src), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := FleetLockConfig{Enabled: true, Listen: ":7777", PathPrefix: "/fleet_lock/", TLSCert: "/c.pem", TLSKey: "/k.pem", ClientCA: "/ca.pem", MaxBodyBytes: 1024,
		AllowedIDs: []string{"0123456789abcdef0123456789abcdef"}, MaxNodelessSlots: 2, RequestTimeout: 5 * time.Second, RateLimit: 3,
		ClientCertID: "cn", RecordGrace: 10 * time.Minute}
	if !reflect.DeepEqual(c.FleetLock, want) {
		t.Fatalf("got %+v, want %+v", c.FleetLock, want)
	}
	if c.Agent.MachineIDFile != "" || !c.Agent.PublishFleetLockID {
		t.Fatalf("machine_id_file %q", c.Agent.MachineIDFile)
	}
	// The rendered configuration loads back to the same.
	back, err := LoadBytes([]byte(c.String()), "back.hcl")
	if err != nil {
		t.Fatalf("reload String(): %v", err)
	}
	if !reflect.DeepEqual(back.FleetLock, want) || !back.Agent.PublishFleetLockID {
		t.Fatalf("round trip: %+v", back.FleetLock)
	}
}

func TestFleetLockErrors(t *testing.T) {
	tests := []struct{ name, src, at, msg string }{
		{"listen without port", "fleetlock {\n  listen = \"localhost\"\n}", `"localhost"`, `fleetlock.listen: invalid address "localhost"`},
		{"listen bad port", "fleetlock {\n  listen = \"127.0.0.1:99999\"\n}", `"127.0.0.1:99999"`, `fleetlock.listen: invalid port "99999"`},
		{"prefix without slash", "fleetlock {\n  path_prefix = \"fleet_lock\"\n}", `"fleet_lock"`, `fleetlock.path_prefix: "fleet_lock" must start with a slash`},
		{"prefix with query", "fleetlock {\n  path_prefix = \"/a?b\"\n}", `"/a?b"`, `must be a plain URL path`},
		{"prefix metrics", "fleetlock {\n  path_prefix = \"/metrics\"\n}", `"/metrics"`, `collides with /metrics`},
		{"cert without key", "fleetlock {\n  tls_cert = \"/c.pem\"\n}", `"/c.pem"`, `fleetlock.tls_cert: tls_cert is set but tls_key is not`},
		{"key without cert", "fleetlock {\n  tls_key = \"/k.pem\"\n}", `"/k.pem"`, `fleetlock.tls_key: tls_key is set but tls_cert is not`},
		{"client ca without tls", "fleetlock {\n  client_ca = \"/ca.pem\"\n}", `"/ca.pem"`, `fleetlock.client_ca: client certificates need TLS`},
		{"body too small", "fleetlock {\n  max_body_bytes = 10\n}", `10`, `fleetlock.max_body_bytes: must be between 256 and 16777216, got 10`},
		{"body not a number", "fleetlock {\n  max_body_bytes = \"big\"\n}", `"big"`, `fleetlock.max_body_bytes: must be a whole number`},
		{"enabled not bool", "fleetlock {\n  enabled = \"yes\"\n}", `"yes"`, `fleetlock.enabled: must be true or false`},
		{"unknown attribute", "fleetlock {\n  port = 7777\n}", `port`, `Unsupported argument`},
		{"relative machine id", "agent {\n  machine_id_file = \"machine-id\"\n}", `"machine-id"`, `agent.machine_id_file: "machine-id" must be an absolute path`},
		{"bad allowed id", "fleetlock {\n  allowed_ids = [\"a/b\"]\n}", `["a/b"]`, `fleetlock.allowed_ids: "a/b" is not a FleetLock id`},
		{"no nodeless slot", "fleetlock {\n  max_nodeless_slots = 0\n}", `0`, `fleetlock.max_nodeless_slots: must be at least 1`},
		{"timeout above write timeout", "fleetlock {\n  request_timeout = \"2m\"\n}", `"2m"`, `fleetlock.request_timeout: must be between 1s and 50s`},
		{"negative rate", "fleetlock {\n  rate_limit = -1\n}", `-1`, `fleetlock.rate_limit: must be 0 (no limit) or more`},
		{"bad cert id mode", "fleetlock {\n  client_cert_id = \"dns\"\n}", `"dns"`, `fleetlock.client_cert_id: "dns": use`},
		{"zero grace", "fleetlock {\n  record_grace = \"0s\"\n}", `"0s"`, `fleetlock.record_grace: must be positive`},
		{"publish not bool", "agent {\n  publish_fleetlock_id = \"yes\"\n}", `"yes"`, `agent.publish_fleetlock_id: must be true or false`},
		{"duplicate block", "fleetlock {\n}\nfleetlock {\n}", "fleetlock {\n}\nfleetlock", `duplicate fleetlock block`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.src), "t.hcl")
			if err == nil {
				t.Fatal("no error")
			}
			at := posOf(t, "t.hcl", tt.src, tt.at)
			if tt.name == "duplicate block" {
				at = "t.hcl:3:1" // the second block
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, tt.msg) && strings.Contains(line, at) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want %q at %s, got:\n%v", tt.msg, at, err)
			}
		})
	}
}

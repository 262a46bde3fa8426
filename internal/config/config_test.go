package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
)

// fullExample returns the full example of docs/configuration.md, so that the
// documentation cannot drift from the code.
func fullExample(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	s := string(doc)
	i := strings.Index(s, "<!-- full-example")
	if i < 0 {
		t.Fatal("docs/configuration.md has no full-example marker")
	}
	s = s[i:]
	start := strings.Index(s, "```hcl\n")
	end := strings.Index(s[start+7:], "```")
	if start < 0 || end < 0 {
		t.Fatal("docs/configuration.md: no hcl block after the full-example marker")
	}
	return []byte(s[start+7 : start+7+end])
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := []struct {
		name      string
		got, want any
	}{
		{"nomad.address", c.Nomad.Address, "http://127.0.0.1:4646"},
		{"nomad.namespace", c.Nomad.Namespace, "default"},
		{"nomad.token", c.Nomad.Token, Secret("")},
		{"state.prefix", c.State.Prefix, "rollboot"},
		{"agent.host", c.Agent.Host, ""},
		{"agent.boot_id_file", c.Agent.BootIDFile, "/proc/sys/kernel/random/boot_id"},
		{"agent.sentinel_file", c.Agent.SentinelFile, "/var/run/reboot-required"},
		{"agent.sentinel_command", len(c.Agent.SentinelCommand), 0},
		{"agent.sentinel_command_interval", c.Agent.SentinelCommandInterval, 5 * time.Minute},
		{"agent.sentinel_command_timeout", c.Agent.SentinelCommandTimeout, 30 * time.Second},
		{"agent.reboot.method", c.Agent.Reboot.Method, "command"},
		{"agent.reboot.command", c.Agent.Reboot.Command, []string{"systemctl", "reboot"}},
		{"agent.reboot.signal", c.Agent.Reboot.Signal, 39},
		{"agent.reboot.delay", c.Agent.Reboot.Delay, time.Duration(0)},
		{"agent.reboot.hook_timeout", c.Agent.Reboot.HookTimeout, 5 * time.Minute},
		{"agent.reboot.recheck_interval", c.Agent.Reboot.RecheckInterval, 5 * time.Second},
		{"coordinator.enabled", c.Coordinator.Enabled, true},
		{"coordinator.lock_ttl", c.Coordinator.LockTTL, 15 * time.Second},
		{"coordinator.resync_interval", c.Coordinator.ResyncInterval, 30 * time.Second},
		{"coordinator.rejoin_timeout", c.Coordinator.RejoinTimeout, 30 * time.Minute},
		{"coordinator.server_stable_for", c.Coordinator.ServerStableFor, 10 * time.Second},
		{"coordinator.reboot_loop_backoff", c.Coordinator.RebootLoopBackoff, time.Hour},
		{"coordinator.reboot_loop_max_backoff", c.Coordinator.RebootLoopMaxBackoff, 24 * time.Hour},
		{"coordinator.history_size", c.Coordinator.HistorySize, 200},
		{"drain.deadline", c.Drain.Deadline, time.Hour},
		{"drain.on_timeout", c.Drain.OnTimeout, "abort"},
		{"drain.retry_backoff", c.Drain.RetryBackoff, 5 * time.Minute},
		{"drain.retry_max_backoff", c.Drain.RetryMaxBackoff, time.Hour},
		{"groups", len(c.Groups), 0},
		{"windows", len(c.Windows), 0},
	}
	for _, w := range want {
		t.Run(w.name, func(t *testing.T) {
			if !reflect.DeepEqual(w.got, w.want) {
				t.Errorf("%s = %#v, want %#v", w.name, w.got, w.want)
			}
		})
	}
}

func TestLoadEmptyFileIsDefault(t *testing.T) {
	c, err := LoadBytes(nil, "empty.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), Default().String(); got != want {
		t.Errorf("empty file:\n%s\nwant the defaults:\n%s", got, want)
	}
}

func TestLoadPartialKeepsDefaults(t *testing.T) {
	c, err := LoadBytes([]byte(`
drain {
  deadline = "2h"
}
agent {
  reboot {
    method = "logind"
  }
}
`), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Drain.Deadline != 2*time.Hour || c.Drain.OnTimeout != "abort" || c.Drain.RetryBackoff != 5*time.Minute {
		t.Errorf("drain = %+v", c.Drain)
	}
	if c.Agent.Reboot.Method != "logind" || c.Agent.Reboot.HookTimeout != 5*time.Minute || c.Agent.BootIDFile == "" {
		t.Errorf("agent = %+v", c.Agent)
	}
}

func TestLoadFullExample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollboot.hcl")
	if err := os.WriteFile(path, fullExample(t), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Nomad: NomadConfig{
			Address: "https://nomad.service.consul:4646", Region: "eu", Namespace: "ops",
			CACert: "/etc/nomad.d/tls/ca.pem", ClientCert: "/etc/nomad.d/tls/cli.pem",
			ClientKey: "/etc/nomad.d/tls/cli-key.pem", TLSServerName: "server.eu.nomad",
		},
		State: StateConfig{Prefix: "rollboot/prod"},
		Agent: AgentConfig{
			BootIDFile:              "/proc/sys/kernel/random/boot_id",
			MachineIDFile:           "/etc/machine-id",
			SentinelFile:            "/var/run/reboot-required",
			SentinelCommand:         []string{"/usr/local/bin/reboot-needed", "--kernel"},
			SentinelCommandInterval: 10 * time.Minute,
			SentinelCommandTimeout:  time.Minute,
			Reboot: RebootConfig{
				Method: "command", Command: []string{"systemctl", "reboot"}, Signal: 39,
				Delay:       30 * time.Second,
				PreHooks:    [][]string{{"/usr/local/bin/notify", "rebooting"}, {"/bin/sync"}},
				PostHooks:   [][]string{{"/usr/local/bin/notify", "back"}},
				HookTimeout: 2 * time.Minute,

				RecheckInterval: 5 * time.Second,
			},
		},
		Coordinator: CoordinatorConfig{
			Enabled: true, LockTTL: 20 * time.Second, ResyncInterval: time.Minute,
			RejoinTimeout: 45 * time.Minute, RebootLoopBackoff: 2 * time.Hour,
			RebootLoopMaxBackoff: 48 * time.Hour, HistorySize: 500, ServerStableFor: 10 * time.Second,
			LeaderTransferDenied: "continue", AgentJob: "rollboot",
		},
		Drain: DrainConfig{Deadline: 45 * time.Minute, OnTimeout: "abort", RetryBackoff: 10 * time.Minute, RetryMaxBackoff: 2 * time.Hour},
		FleetLock: FleetLockConfig{Enabled: true, Listen: "10.0.0.5:7777", PathPrefix: "/fleet_lock",
			TLSCert: "/etc/rollboot/tls/fleetlock.pem", TLSKey: "/etc/rollboot/tls/fleetlock-key.pem", MaxBodyBytes: 64 << 10,
			MaxNodelessSlots: 1, RequestTimeout: 20 * time.Second, RateLimit: 20, ClientCertID: "san_or_cn", RecordGrace: time.Hour},
		Groups: []GroupConfig{
			{Name: "batch", Filter: `NodePool == "batch"`, Concurrency: 3, MaxUnavailable: "25%", Windows: []string{"weeknights", "weekend"}},
			{Name: "gpu-r1", Filter: `"gpu" in NodeClass and Meta.rack == "r1"`, Concurrency: 1, Windows: []string{"weekend"}},
		},
		Windows: []WindowConfig{
			{Name: "weeknights", Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "22:00", End: "05:00", TimeZone: "Europe/Berlin"},
			{Name: "weekend", Days: []string{"Saturday", "Sunday"}, Start: "00:00", End: "24:00", TimeZone: "Europe/Berlin"},
		},
	}
	got := *c
	got.pos, got.bad = nil, nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("loaded\n%s\nwant\n%s", got.String(), want.String())
	}
	// Positions are kept for the values written in the file.
	if r := c.pos["group.1.filter"]; r.Filename != path || r.Start.Line == 0 {
		t.Errorf("position of group.1.filter = %+v", r)
	}
}

func TestLoadJSON(t *testing.T) {
	c, err := LoadBytes([]byte(`{
  "drain": {"deadline": "2h"},
  "group": {"batch": {"filter": "NodePool == \"batch\"", "concurrency": 2}}
}`), "rollboot.hcl.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Drain.Deadline != 2*time.Hour || len(c.Groups) != 1 || c.Groups[0].Concurrency != 2 {
		t.Errorf("got %+v %+v", c.Drain, c.Groups)
	}
	_, err = LoadBytes([]byte(`{
  "drain": {"deadline": "2x"}
}`), "bad.json")
	if err == nil || !strings.Contains(err.Error(), "bad.json:2:25: drain.deadline: invalid duration") {
		t.Errorf("error = %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if err == nil || !strings.Contains(err.Error(), "read config") {
		t.Fatalf("error = %v", err)
	}
}

func TestStringRoundTrip(t *testing.T) {
	c, err := LoadBytes(fullExample(t), "full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c.Agent.Reboot.PreHooks = append(c.Agent.Reboot.PreHooks, []string{"/bin/true"})
	again, err := LoadBytes([]byte(c.String()), "printed.hcl")
	if err != nil {
		t.Fatalf("String() does not load back: %v\n%s", err, c.String())
	}
	if c.String() != again.String() {
		t.Errorf("round trip differs:\n%s\n---\n%s", c.String(), again.String())
	}
	a, b := *c, *again
	a.pos, b.pos, a.bad, b.bad = nil, nil, nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip differs:\n%+v\n%+v", a, b)
	}
}

func TestAPIConfig(t *testing.T) {
	n := NomadConfig{
		Address: "https://nomad:4646", Token: "tok", Region: "eu", Namespace: "ops",
		CACert: "/ca.pem", ClientCert: "/c.pem", ClientKey: "/k.pem", TLSServerName: "server.eu.nomad", TLSSkipVerify: true,
	}
	got := n.APIConfig()
	want := &api.Config{
		Address: "https://nomad:4646", SecretID: "tok", Region: "eu", Namespace: "ops",
		TLSConfig: &api.TLSConfig{CACert: "/ca.pem", ClientCert: "/c.pem", ClientKey: "/k.pem", TLSServerName: "server.eu.nomad", Insecure: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("APIConfig = %+v (TLS %+v)", got, got.TLSConfig)
	}
	// The default connection makes a working client.
	client, err := api.NewClient(Default().Nomad.APIConfig())
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if client.Address() != "http://127.0.0.1:4646" {
		t.Errorf("client address %q", client.Address())
	}
}

func TestPolicyGroups(t *testing.T) {
	c, err := LoadBytes(fullExample(t), "full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.PolicyGroups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	if strings.Join(names, ",") != "batch,gpu-r1,default" {
		t.Fatalf("groups %v", names)
	}
	batch, gpu, def := groups[0], groups[1], groups[2]
	if batch.Concurrency != 3 || batch.MaxUnavailablePct != 25 || len(batch.Schedule) != 2 {
		t.Errorf("batch = %+v", batch)
	}
	if def.Concurrency != 1 || def.MaxUnavailablePct != 0 || def.Filter != nil || len(def.Schedule) != 2 {
		t.Errorf("default = %+v", def)
	}
	if len(gpu.Schedule) != 1 || gpu.Schedule[0].Name != "weekend" || gpu.Schedule[0].Location.String() != "Europe/Berlin" {
		t.Errorf("gpu schedule = %+v", gpu.Schedule)
	}

	nodes := []struct {
		node *api.Node
		want string
	}{
		{&api.Node{Name: "b1", NodePool: "batch"}, "batch"},
		{&api.Node{Name: "g1", NodePool: "default", NodeClass: "gpu-a100", Meta: map[string]string{"rack": "r1"}}, "gpu-r1"},
		{&api.Node{Name: "g2", NodePool: "default", NodeClass: "gpu-a100", Meta: map[string]string{"rack": "r2"}}, "default"},
		{&api.Node{Name: "w1", NodePool: "default"}, "default"},
	}
	for _, n := range nodes {
		got, err := policy.Assign(groups, n.node)
		if err != nil || got != n.want {
			t.Errorf("Assign(%s) = %q, %v; want %q", n.node.Name, got, err, n.want)
		}
	}

	// weeknights: Monday 22:00 in Berlin (21:00 UTC in winter) to 05:00.
	monday := time.Date(2025, 1, 6, 21, 30, 0, 0, time.UTC)
	if !batch.Schedule.Open(monday) || gpu.Schedule.Open(monday) {
		t.Errorf("Monday night: batch open %v, gpu open %v", batch.Schedule.Open(monday), gpu.Schedule.Open(monday))
	}
	// Friday night runs into the weekend window: merged, open until Monday
	// 00:00 Berlin (weeknights opens on Monday evening, not Sunday).
	friday := time.Date(2025, 1, 10, 22, 0, 0, 0, time.UTC) // Fri 23:00 Berlin
	if got, want := batch.Schedule.Remaining(friday), 49*time.Hour; got != want {
		t.Errorf("batch remaining from Friday night = %v, want %v", got, want)
	}

	// An invalid configuration gives Validate's errors.
	c.Groups[0].Concurrency = 0
	if _, err := c.PolicyGroups(); err == nil || !strings.Contains(err.Error(), "concurrency") {
		t.Errorf("PolicyGroups on an invalid config: %v", err)
	}
}

func TestPolicyGroupsNoWindows(t *testing.T) {
	c, err := LoadBytes([]byte(`group "all" {}`), "a.hcl")
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.PolicyGroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Schedule != nil || groups[0].Filter != nil || groups[1].Name != "default" {
		t.Errorf("groups = %+v", groups)
	}
	if !groups[0].Schedule.Open(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)) {
		t.Error("no windows should be always open")
	}
}

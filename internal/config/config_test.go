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
	return docExample(t, "<!-- full-example")
}

// docExample returns the hcl block after marker in docs/configuration.md.
func docExample(t *testing.T, marker string) []byte {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	s := string(doc)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("docs/configuration.md has no %s marker", marker)
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
	if _, err := Compile(c); err != nil {
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
		{"agent.server_lock_file", c.Agent.ServerLockFile, "/var/lib/rollboot/server-lock.json"},
		{"agent.record_file", c.Agent.RecordFile, "/var/lib/rollboot/record.json"},
		{"agent.server_lock_ttl", c.Agent.ServerLockTTL, 15 * time.Minute},
		{"coordinator.enabled", c.Coordinator.Enabled, false},
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
	c, err := loadBoth([]byte(`
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
			BootTimeFile:            "/proc/stat",
			MachineIDFile:           "/etc/machine-id",
			SentinelFile:            "/var/run/reboot-required",
			SentinelCommand:         []string{"/usr/local/bin/reboot-needed", "--kernel"},
			SentinelCommandInterval: 10 * time.Minute,
			SentinelCommandTimeout:  time.Minute,
			Detectors:               []string{"auto", "kernel"},
			DetectorRoot:            "/",
			DetectorTimeout:         2 * time.Minute,
			KernelOnly:              true,
			RecordFile:              "/var/lib/rollboot/record.json",
			ServerLockFile:          "/var/lib/rollboot/server-lock.json",
			ServerLockTTL:           15 * time.Minute,
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
			Enabled: true, LockTTL: 20 * time.Second, Standbys: 2, ResyncInterval: time.Minute,
			RejoinTimeout: 30 * time.Minute, RebootLoopBackoff: time.Hour,
			RebootLoopMaxBackoff: 24 * time.Hour, PurgedNodeGrace: 5 * time.Minute, HistorySize: 200, ServerStableFor: 10 * time.Second,
			LeaderTransferDenied: "continue", AgentJob: "rollboot", NodeMeta: true,
		},
		Drain: DrainConfig{Deadline: time.Hour, OnTimeout: "abort", RetryBackoff: 5 * time.Minute, RetryMaxBackoff: time.Hour,
			IgnoreSystemJobs: true},
		Healthy: HealthyConfig{Deadline: 10 * time.Minute, OnDeadline: "hold"},
		Silence: SilenceConfig{Duration: 30 * time.Minute, Tail: 5 * time.Minute},
		FleetLock: FleetLockConfig{Enabled: true, Listen: "10.0.0.5:7777", PathPrefix: "/fleet_lock",
			TLSCert: "/etc/rollboot/tls/fleetlock.pem", TLSKey: "/etc/rollboot/tls/fleetlock-key.pem", MaxBodyBytes: 64 << 10,
			MaxNodelessSlots: 1, RequestTimeout: 20 * time.Second, RateLimit: 20, ClientCertID: "san_or_cn", RecordGrace: time.Hour},
		Notify: NotifyConfig{URLs: []Secret{"slack://hook:T00000000-B00000000-XXXXXXXXXXXXXXXXXXXXXXXX@webhook"},
			Events:  []string{"drain_started", "back_in_service", "stuck", "drain_aborted", "reboot_failed", "paused", "resumed"},
			Timeout: 10 * time.Second, Queue: 100,
			Messages: map[string]string{"stuck": "{{.Host}} did not come back: {{.Error}}. When it is safe: rollboot release {{.Host}}"}},
		Alerts:        defaultAlerts(),
		Workloads:     defaultWorkloads(),
		Capacity:      CapacityConfig{Enabled: true, Headroom: "0%"},
		Approval:      ApprovalConfig{Timeout: 10 * time.Second, Recheck: time.Minute, HoldSlot: time.Hour, AuthHeader: "Authorization"},
		FailureBudget: FailureBudgetConfig{Window: 24 * time.Hour, Count: failureKindNames},
	}
	got := c.Config
	got.pos = nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("loaded\n%s\nwant\n%s", got.String(), want.String())
	}
	// Positions are kept for the values written in the file.
	if r := c.pos["coordinator.lock_ttl"]; r.Filename != path || r.Start.Line == 0 {
		t.Errorf("position of coordinator.lock_ttl = %+v", r)
	}
}

func TestLoadJSON(t *testing.T) {
	c, err := loadBoth([]byte(`{
  "drain": {"deadline": "2h"},
  "group": {"batch": {"filter": "NodePool == \"batch\"", "concurrency": 2}}
}`), "rollboot.hcl.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Drain.Deadline != 2*time.Hour || len(c.Groups) != 1 || c.Groups[0].Concurrency != 2 {
		t.Errorf("got %+v %+v", c.Drain, c.Groups)
	}
	_, err = loadBoth([]byte(`{
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
	c.Notify.URLs = nil // secrets: printed masked, they do not load back
	again, err := LoadBytes([]byte(c.String()), "printed.hcl")
	if err != nil {
		t.Fatalf("String() does not load back: %v\n%s", err, c.String())
	}
	if c.String() != again.String() {
		t.Errorf("round trip differs:\n%s\n---\n%s", c.String(), again.String())
	}
	a, b := c.Config, again.Config
	a.pos, b.pos = nil, nil
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

// assign is the group a node falls in: the first whose filter selects it, as
// Nomad evaluates the filter the coordinator sends, else the default group.
func assign(t *testing.T, p policy.Policy, node *api.Node) string {
	t.Helper()
	for _, g := range p.Groups {
		if g.Filter == nil {
			return g.Name
		}
		ok, err := g.Filter.Evaluate(node)
		if err != nil {
			t.Fatalf("group %s: filter on %s: %v", g.Name, node.Name, err)
		}
		if ok {
			return g.Name
		}
	}
	return p.Default.Name
}

func TestCompilePolicy(t *testing.T) {
	pf, err := ParsePolicy(docExample(t, "<!-- policy-example"), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(pf)
	if err != nil {
		t.Fatal(err)
	}
	c := r.cc
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy
	if got := strings.Join(p.Names(), ","); got != "batch,gpu-r1,default" {
		t.Fatalf("groups %v", got)
	}
	batch, gpu, def := p.Groups[0], p.Groups[1], p.Default
	if batch.Concurrency != 3 || batch.MaxUnavailablePct != 25 || len(batch.Schedule) != 2 {
		t.Errorf("batch = %+v", batch)
	}
	if def.Name != policy.DefaultGroupName || def.Concurrency != 1 || def.MaxUnavailablePct != 0 || def.Filter != nil || len(def.Schedule) != 2 {
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
		if got := assign(t, p, n.node); got != n.want {
			t.Errorf("node %s falls in %q; want %q", n.node.Name, got, n.want)
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

	// An invalid configuration gives the errors and no policy.
	c.Groups[0].Concurrency = 0
	if cc, err := Compile(&c.Config); err == nil || cc != nil || !strings.Contains(err.Error(), "policy.hcl:") || !strings.Contains(err.Error(), "concurrency") {
		t.Errorf("Compile of an invalid config: %v, %v", cc, err)
	}
}

// Compile turns every group, window and percentage into its typed value, the
// default group named explicitly whatever the order of the blocks in the file.
func TestCompileTable(t *testing.T) {
	night := policy.Window{Name: "night", Days: []time.Weekday{time.Monday, time.Tuesday}, Start: 22 * time.Hour, End: 4 * time.Hour, Location: time.UTC}
	day := policy.Window{Name: "day", Days: []time.Weekday{time.Saturday}, Start: 0, End: 24 * time.Hour, Location: time.UTC}
	type group struct {
		name, filter string
		conc, pct    int
		windows      []string // names of the schedule's windows
	}
	tests := []struct {
		name    string
		src     string
		groups  []group
		def     group
		windows []policy.Window // the default schedule
		force   bool
		hold    bool
	}{
		{name: "empty file", src: "", def: group{name: "default", conc: 1}},
		{name: "one catch-all group, always open", src: `group "all" { concurrency = 4 }`,
			groups: []group{{name: "all", conc: 4}}, def: group{name: "default", conc: 1}},
		{name: "windows after the groups that name them, groups in file order",
			src: `
group "b" {
  filter = "NodePool == \"b\""
  windows = ["day"]
}
group "a" {
  filter = "NodePool == \"a\""
  concurrency = 2
  max_unavailable = "50%"
}
window "night" {
  days = ["mon", "Tuesday"]
  start = "22:00"
  end = "04:00"
}
window "day" {
  days = ["sat"]
  start = "00:00"
  end = "24:00"
}
drain { on_timeout = "force" }
coordinator { leader_transfer_denied = "hold" }
`,
			groups: []group{
				{name: "b", filter: `NodePool == "b"`, conc: 1, windows: []string{"day"}},
				{name: "a", filter: `NodePool == "a"`, conc: 2, pct: 50, windows: []string{"night", "day"}},
			},
			def:     group{name: "default", conc: 1, windows: []string{"night", "day"}},
			windows: []policy.Window{night, day},
			force:   true, hold: true,
		},
		{name: "a group naming a window twice gets it twice", src: `
window "day" {
  days = ["sat"]
  start = "00:00"
  end = "24:00"
}
group "x" { windows = ["day", "day"] }`,
			groups:  []group{{name: "x", conc: 1, windows: []string{"day", "day"}}},
			def:     group{name: "default", conc: 1, windows: []string{"day"}},
			windows: []policy.Window{day},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := loadBoth([]byte(tt.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, g policy.Group, want group) {
				t.Helper()
				var names []string
				for _, w := range g.Schedule {
					names = append(names, w.Name)
				}
				if g.Name != want.name || g.FilterExpression() != want.filter || g.Concurrency != want.conc ||
					g.MaxUnavailablePct != want.pct || strings.Join(names, ",") != strings.Join(want.windows, ",") {
					t.Errorf("%s = {%s %q conc %d pct %d windows %v}, want %+v", what, g.Name, g.FilterExpression(), g.Concurrency, g.MaxUnavailablePct, names, want)
				}
			}
			if len(cc.Policy.Groups) != len(tt.groups) {
				t.Fatalf("groups %v, want %d", cc.Policy.Names(), len(tt.groups))
			}
			for i, g := range cc.Policy.Groups {
				check("group "+g.Name, g, tt.groups[i])
			}
			check("default group", cc.Policy.Default, tt.def)
			if !reflect.DeepEqual([]policy.Window(cc.Policy.Default.Schedule), tt.windows) {
				t.Errorf("default schedule = %+v, want %+v", cc.Policy.Default.Schedule, tt.windows)
			}
			if cc.ForceDrains != tt.force || cc.HoldOnDeniedHandOver != tt.hold {
				t.Errorf("ForceDrains %v, HoldOnDeniedHandOver %v; want %v, %v", cc.ForceDrains, cc.HoldOnDeniedHandOver, tt.force, tt.hold)
			}
		})
	}
}

// Compile copies the settings: the Config it was given can change afterwards
// (or be compiled again with other flags) without changing what was compiled.
func TestCompileCopies(t *testing.T) {
	c, err := ParseBytes([]byte("state { prefix = \"a\" }"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	c.State.Prefix = "b.c"
	if cc.State.Prefix != "a" {
		t.Errorf("compiled prefix changed to %q", cc.State.Prefix)
	}
	if _, err := Compile(c); err == nil || !strings.HasPrefix(err.Error(), "t.hcl:1:18: state.prefix:") {
		t.Errorf("changed config: %v", err)
	}
}

// Parse keeps what it cannot decode for Compile, so that problems of values
// and of checks are reported together, once, after the environment and flags.
func TestParseThenCompileReportsEverythingOnce(t *testing.T) {
	src := "agent {\n  sentinel_command_interval = \"5x\"\n}\nstate {\n  prefix = \"a.b\"\n}\n"
	c, err := ParseBytes([]byte(src), "t.hcl")
	if err != nil {
		t.Fatalf("Parse fails on a value problem: %v", err)
	}
	if err := c.ApplyEnv(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	_, err = Compile(c)
	want := "t.hcl:2:31: agent.sentinel_command_interval: invalid duration \"5x\": use a number with a unit (ns, us, ms, s, m, h) such as \"30s\", \"5m\" or \"1h30m\"\n" +
		"t.hcl:5:12: state.prefix: invalid variable path \"a.b\": use only letters, digits and - _ ~ / (no dots)"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	// A file that is not HCL fails at once.
	if _, err := ParseBytes([]byte("drain {"), "t.hcl"); err == nil || !strings.HasPrefix(err.Error(), "t.hcl:1:") {
		t.Errorf("syntax error: %v", err)
	}
}

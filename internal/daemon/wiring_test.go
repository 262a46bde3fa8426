package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/agent"
	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
)

func compile(t *testing.T, src string) *config.Compiled {
	t.Helper()
	cc, err := config.LoadBytes([]byte(src), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// compileWith compiles a local file with a policy file in place of its policy.
func compileWith(t *testing.T, local, pol string) *config.Compiled {
	t.Helper()
	pf, err := config.ParsePolicy([]byte(pol), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := config.CompilePolicy(pf)
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, local).With(r)
}

const windowsHCL = `
window "night" {
  start = "22:00"
  end = "04:00"
}
window "sat" {
  days = ["sat"]
  start = "00:00"
  end = "24:00"
}
`

// The coordinator and the FleetLock server get the configured groups in file
// order, each with its own filter, budget and schedule, and the default group
// explicitly, whatever the order of the blocks in the file.
func TestGroupsWiring(t *testing.T) {
	groupA := "group \"A\" {\n  filter = \"NodePool == \\\"a\\\"\"\n  concurrency = 2\n  max_unavailable = \"50%\"\n  windows = [\"sat\"]\n}\n"
	groupB := "group \"B\" {\n  filter = \"Meta.rack == \\\"r1\\\"\"\n}\n"
	type want struct {
		name, filter string
		conc, pct    int
		windows      string
	}
	wantA := want{"A", `NodePool == "a"`, 2, 50, "sat"}
	wantB := want{"B", `Meta.rack == "r1"`, 1, 0, "night,sat"}
	wantDefault := want{"default", "", 1, 0, "night,sat"}
	tests := []struct {
		name   string
		src    string
		groups []want
		def    want
	}{
		{name: "no groups", src: "", def: want{"default", "", 1, 0, ""}},
		{name: "groups before windows", src: groupA + groupB + windowsHCL, groups: []want{wantA, wantB}, def: wantDefault},
		{name: "windows before groups", src: windowsHCL + groupA + groupB, groups: []want{wantA, wantB}, def: wantDefault},
		{name: "B first: file order is match order", src: groupB + windowsHCL + groupA, groups: []want{wantB, wantA}, def: wantDefault},
		{name: "a catch-all group last", src: groupA + "group \"rest\" {\n  concurrency = 3\n}\n" + windowsHCL,
			groups: []want{wantA, {"rest", "", 3, 0, "night,sat"}}, def: wantDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := compileWith(t, "", tt.src)
			c, err := Client(cc)
			if err != nil {
				t.Fatal(err)
			}
			log := slog.New(slog.DiscardHandler)
			co := coordinatorOptions(cc, c, Store(cc, c), log, nil)
			r := coordinatorRules(cc, 0)
			co.Groups, co.DefaultGroup = r.Groups, r.DefaultGroup
			check := func(what string, g policy.Group, filter string, w want) {
				t.Helper()
				var ws []string
				for _, win := range g.Schedule {
					ws = append(ws, win.Name)
				}
				got := want{g.Name, filter, g.Concurrency, g.MaxUnavailablePct, strings.Join(ws, ",")}
				if got != w {
					t.Errorf("%s = %+v, want %+v", what, got, w)
				}
			}
			if len(co.Groups) != len(tt.groups) {
				t.Fatalf("coordinator groups: %d, want %d", len(co.Groups), len(tt.groups))
			}
			for i, gs := range co.Groups {
				check("coordinator group "+gs.Name, gs.Group, gs.Filter, tt.groups[i])
				// The filter Nomad evaluates is the one that was compiled.
				if gs.Group.FilterExpression() != gs.Filter {
					t.Errorf("group %s: filter %q sent to Nomad, %q compiled", gs.Name, gs.Filter, gs.Group.FilterExpression())
				}
			}
			check("coordinator default group", co.DefaultGroup, co.DefaultGroup.FilterExpression(), tt.def)

			fo := fleetLockOptions(cc, nil, nil, log)
			names := []string{}
			for _, g := range tt.groups {
				names = append(names, g.name)
			}
			if got := fo.Groups.Names(); !slices.Equal(got, append(names, "default")) {
				t.Errorf("FleetLock groups %v, want %v then default", got, names)
			}
			if fo.Groups.Default.Name != policy.DefaultGroupName {
				t.Errorf("FleetLock default group %q", fo.Groups.Default.Name)
			}
		})
	}
}

// The coordinator's timings and switches come from the local configuration and
// the policy: the options hold the safe default rules, the stored policy's
// rules replace them (coordinatorRules).
func TestCoordinatorOptions(t *testing.T) {
	cc := compileWith(t, `
coordinator {
  resync_interval = "7s"
  agent_job = ""
}
nomad { namespace = "ops" }
`, `
coordinator {
  rejoin_timeout = "9m"
  reboot_loop_backoff = "2h"
  reboot_loop_max_backoff = "3h"
  history_size = 12
  server_stable_for = "11s"
  leader_transfer_denied = "hold"
}
drain {
  deadline = "20m"
  on_timeout = "force"
  retry_backoff = "1m"
  retry_max_backoff = "5m"
}
capacity {
  headroom = "20%"
}
`)
	c, err := Client(cc)
	if err != nil {
		t.Fatal(err)
	}
	o := coordinatorOptions(cc, c, Store(cc, c), slog.New(slog.DiscardHandler), nil)
	if o.Policy == nil || o.Identity == "" {
		t.Errorf("no stored policy source (%v) or identity (%q)", o.Policy, o.Identity)
	}
	r := coordinatorRules(cc, 3)
	o.Timing, o.HistorySize, o.ServerStableFor, o.HoldOnDeniedHandOver = r.Timing, r.HistorySize, r.ServerStableFor, r.HoldOnDeniedHandOver
	tm := o.Timing
	if tm.DrainDeadline != 20*time.Minute || !tm.ForceOnTimeout || tm.RetryBackoff != time.Minute || tm.RetryMaxBackoff != 5*time.Minute ||
		tm.RejoinTimeout != 9*time.Minute || tm.LoopBackoff != 2*time.Hour || tm.LoopMaxBackoff != 3*time.Hour {
		t.Errorf("timing = %+v", tm)
	}
	if o.Resync != 7*time.Second || o.HistorySize != 12 || o.ServerStableFor != 11*time.Second || !o.HoldOnDeniedHandOver {
		t.Errorf("options = %+v", o)
	}
	if want := (rules.CapacityGate{Enabled: true, Headroom: 0.2}); r.Capacity != want {
		t.Errorf("capacity = %+v, want %+v", r.Capacity, want)
	}
	if o.Jobs != nil || o.AgentJob != "" || o.AgentJobNamespace != "ops" {
		t.Errorf("agent job check: jobs %v, job %q in %q; want none", o.Jobs, o.AgentJob, o.AgentJobNamespace)
	}

	def := compile(t, "")
	o = coordinatorOptions(def, c, Store(def, c), slog.New(slog.DiscardHandler), nil)
	if o.Timing.ForceOnTimeout || o.HoldOnDeniedHandOver || o.Jobs == nil || o.AgentJob != "rollboot" || o.AgentJobNamespace != "default" {
		t.Errorf("defaults: force %v, hold %v, jobs %v, job %q in %q", o.Timing.ForceOnTimeout, o.HoldOnDeniedHandOver, o.Jobs, o.AgentJob, o.AgentJobNamespace)
	}
	def.Coordinator.AgentJobNamespace = "agents"
	if got := agentJobNamespace(def); got != "agents" {
		t.Errorf("agent_job_namespace: %q", got)
	}
}

func TestAgentHost(t *testing.T) {
	osName := func(name string, err error) func() (string, error) {
		return func() (string, error) { return name, err }
	}
	tests := []struct {
		name       string
		configured string
		os         func() (string, error)
		host       string
		hostname   string
		wantErr    string
	}{
		{name: "the OS host name", os: osName("web-1", nil), host: "web-1", hostname: "web-1"},
		{name: "agent.host wins", configured: "node-7", os: osName("web-1", nil), host: "node-7", hostname: "web-1"},
		{name: "agent.host without an OS name", configured: "node-7", os: osName("", errors.New("no name")), host: "node-7"},
		{name: "no name at all", os: osName("", errors.New("no name")), wantErr: "agent: cannot tell the host name: set agent.host"},
		{name: "OS name with a slash", os: osName("a/b", nil), wantErr: "set agent.host"},
		{name: "OS name with a tilde", os: osName("a~b", nil), wantErr: "set agent.host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, hostname, err := agentHost(tt.configured, tt.os)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || host != tt.host || hostname != tt.hostname {
				t.Fatalf("agentHost = %q, %q, %v; want %q, %q", host, hostname, err, tt.host, tt.hostname)
			}
		})
	}
}

func TestLocalAgents(t *testing.T) {
	cc := compile(t, "")
	c, err := Client(cc)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		given          discovery.Local
		hostConfigured bool
		want           string
	}{
		{name: "no Vault node name: the host's", want: "web-1"},
		{name: "the given name stays", given: discovery.Local{Hostname: "vault-a"}, want: "vault-a"},
		{name: "agent.host wins over the given name", given: discovery.Local{Hostname: "vault-a"}, hostConfigured: true, want: "web-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := tt.given
			local, err := localAgents(&given, c, "web-1", tt.hostConfigured)
			if err != nil {
				t.Fatal(err)
			}
			if local.Hostname != tt.want || local.Nomad != c {
				t.Errorf("hostname %q (want %q), nomad client set: %v", local.Hostname, tt.want, local.Nomad == c)
			}
			// The host's Nomad node is the node of its rollboot name, whatever
			// Vault's node name guess is.
			if local.Host != "web-1" {
				t.Errorf("host %q, want web-1", local.Host)
			}
		})
	}
}

func TestAgentOptions(t *testing.T) {
	cc := compile(t, `
agent {
  boot_id_file = "/run/boot_id"
  sentinel_command = ["/bin/needs-reboot"]
  sentinel_command_interval = "2m"
  detectors = [] # "auto" would depend on the machine running the test
  pass_env = ["VAULT_TOKEN"]
  reboot {
    delay = "3s"
    pre_hooks = [["/bin/pre"]]
    post_hooks = [["/bin/post"]]
    hook_timeout = "1m"
    recheck_interval = "2s"
  }
}
coordinator { enabled = false }
`)
	c, err := Client(cc)
	if err != nil {
		t.Fatal(err)
	}
	o := agentOptions(cc, c, "web-1", "web-1.example", &discovery.Local{}, slog.New(slog.DiscardHandler))
	if o.Host != "web-1" || o.Hostname != "web-1.example" || o.BootIDFile != "/run/boot_id" || o.SlowEvery != 2*time.Minute ||
		o.Delay != 3*time.Second || o.HookTimeout != time.Minute || o.RecheckEvery != 2*time.Second || o.Candidate {
		t.Errorf("options = %+v", o)
	}
	if len(o.Detectors) != 2 || !slices.Equal(o.SlowIndexes, []int{1}) || !slices.Equal(o.PassEnv, []string{"VAULT_TOKEN"}) ||
		len(o.PreHooks) != 1 || len(o.PostHooks) != 1 {
		t.Errorf("detectors %v (slow %v), pass_env %v, hooks %v %v", o.Detectors, o.SlowIndexes, o.PassEnv, o.PreHooks, o.PostHooks)
	}
	if o.FleetLockID != "" {
		t.Errorf("FleetLock id %q published without publish_fleetlock_id", o.FleetLockID)
	}
	if o.Local == nil || o.NodeList == nil || o.Nodes == nil {
		t.Errorf("Nomad reads missing: local agent %v, node list %v, node %v", o.Local, o.NodeList, o.Nodes)
	}
}

func TestRebooter(t *testing.T) {
	tests := []struct {
		method  string
		want    agent.Rebooter
		wantErr bool
	}{
		{config.RebootMethodCommand, agent.CommandRebooter{Argv: []string{"systemctl", "reboot"}, PassEnv: []string{"X_TOKEN"}}, false},
		{config.RebootMethodSignal, agent.SignalRebooter{Signal: 39}, false},
		{config.RebootMethodLogind, agent.LogindRebooter{}, false},
		{"kexec", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			rc := config.Default().Agent.Reboot
			rc.Method = tt.method
			got, err := Rebooter(rc, "X_TOKEN")
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v", err)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Rebooter = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestDetectors(t *testing.T) {
	ac := config.Default().Agent
	ac.DetectorRoot = t.TempDir() // no os-release: "auto" chooses none
	dets, slow, kinds, note := Detectors(ac)
	if len(dets) != 1 || len(slow) != 0 || len(kinds) != 0 || !strings.Contains(note, "no os-release") {
		t.Errorf("defaults without os-release: %v, slow %v, kinds %v, note %q; want the sentinel file only", dets, slow, kinds, note)
	}
	ac.SentinelFile = ""
	if dets, _, _, _ := Detectors(ac); len(dets) != 0 {
		t.Errorf("no detector configured: %v", dets)
	}
	ac.SentinelCommand = []string{"/bin/check"}
	if dets, slow, _, _ := Detectors(ac); len(dets) != 1 || !slices.Equal(slow, []int{0}) {
		t.Errorf("command only: %v, slow %v", dets, slow)
	}
}

// The debian detector takes over the sentinel file when both name the same
// file; every detector that runs a program or lists folders is slow.
func TestDetectorsChosen(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=ubuntu\nID_LIKE=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ac := config.Default().Agent
	ac.DetectorRoot = root
	ac.SentinelFile = filepath.Join(root, "var/run/reboot-required")
	ac.Detectors = []string{"auto", "kernel", "debian"}
	dets, slow, kinds, note := Detectors(ac)
	if note != "" || !slices.Equal(kinds, []string{"debian", "kernel"}) {
		t.Fatalf("kinds %v, note %q; want debian (from os-release) and kernel once each", kinds, note)
	}
	want := []agent.Detector{agent.DebianDetector{Sys: agent.System{Root: root, Timeout: ac.DetectorTimeout}},
		agent.KernelDetector{Sys: agent.System{Root: root, Timeout: ac.DetectorTimeout}}}
	if !reflect.DeepEqual(dets, want) || !slices.Equal(slow, []int{1}) {
		t.Errorf("detectors %#v, slow %v; want %#v, slow [1]", dets, slow, want)
	}
	ac.SentinelFile = "/elsewhere/reboot-required"
	if dets, _, _, _ := Detectors(ac); len(dets) != 3 {
		t.Errorf("a sentinel file of its own: %d detectors, want it beside debian and kernel", len(dets))
	}
}

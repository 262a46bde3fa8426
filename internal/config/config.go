// Package config loads rollboot's HCL configuration.
//
// The pattern is nomad-autoscaler's: Default returns the defaults, Parse
// reads a file over them, ApplyEnv fills the Nomad connection from the
// NOMAD_* variables the nomad CLI uses, the command's flags come next, and
// Compile checks the result once, reporting every problem at once, each
// with the file:line:col of the offending value. A value that is given but
// malformed is an error, never replaced by a default. Compile returns the
// typed values (package policy's groups, windows and budgets) that the
// daemons take as is.
//
// Each block has a table of its settings (table.go), which drives the
// defaults, the decoding, the checks, the renderings and the settings tables
// of docs/configuration.md.
package config

import (
	"reflect"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Config is rollboot's whole configuration.
type Config struct {
	Nomad       NomadConfig
	State       StateConfig
	Agent       AgentConfig
	Coordinator CoordinatorConfig
	Drain       DrainConfig
	FleetLock   FleetLockConfig
	Telemetry   TelemetryConfig
	Notify      NotifyConfig
	// Groups are matched against nodes in order; the first match wins.
	// Nodes matched by none fall in the implicit group "default".
	Groups []GroupConfig
	// Windows are the maintenance windows, referred to by name from groups.
	Windows []WindowConfig
	// Freezes are the date ranges in which no drain starts (freeze.go).
	Freezes []FreezeConfig
	// Alerts: no new drain starts while alerts fire (policy).
	Alerts AlertsConfig
	// Workloads are the workload blockers (policy block workloads).
	Workloads WorkloadsConfig
	// Capacity is the capacity gate of admission (policy).
	Capacity CapacityConfig
	// Healthy is the top-level healthy block: when a rebooted host counts as
	// back, for the groups that do not say otherwise (healthy.go).
	Healthy HealthyConfig
	// Silence is the top-level silence block: the Alertmanager silence of a
	// host out for its reboot, for the groups that do not say otherwise.
	Silence SilenceConfig
	// Gates are the health gates (gates.go).
	Gates []GateConfig
	// NodeMeta is what the coordinator writes on the nodes' metadata beside
	// its own keys (policy; nodemeta.go).
	NodeMeta NodeMetaConfig
	// Approval is what the groups that need an approval wait for
	// (approval.go).
	Approval ApprovalConfig
	// FailureBudget is the rollout's failure budget, and Rollout its caps on
	// all groups together (policy; budgets.go).
	FailureBudget FailureBudgetConfig
	Rollout       RolloutConfig

	// pos records where each value came from (a file range, or an
	// environment variable as the file name with no line), keyed by the
	// value's path such as "drain.deadline" or "group.0.filter".
	pos map[string]hcl.Range
	// bad holds the keys whose value was given but could not be decoded,
	// so that Compile does not add confusing errors about the default
	// that remained in their place.
	bad map[string]bool
	// problems are the values Parse could not decode, reported by Compile.
	problems Errors
}

// NomadConfig is how to reach the Nomad HTTP API. Unset values are filled
// from the NOMAD_* environment variables by ApplyEnv.
type NomadConfig struct {
	Address string
	// Token is the ACL token. It is a Secret so that it never shows up in
	// formatted output or logs.
	Token         Secret
	Region        string
	Namespace     string // namespace of rollboot's Variables
	CACert        string
	CAPath        string
	ClientCert    string
	ClientKey     string
	TLSServerName string
	TLSSkipVerify bool
}

// StateConfig says where rollboot keeps its state in Nomad Variables.
type StateConfig struct {
	Prefix string
}

// AgentConfig configures the per-host agent.
type AgentConfig struct {
	// Host is the host's name; "" means os.Hostname() at run time.
	Host       string
	BootIDFile string
	// BootTimeFile is the kernel's /proc/stat (its btime line: when the host
	// booted, for max_uptime); "" publishes no boot time.
	BootTimeFile string
	// MachineIDFile is the machine-id(5) file the agent derives the host's
	// FleetLock (Zincati) id from; a missing file means no id, "" disables it.
	MachineIDFile string
	// PublishFleetLockID: publish the FleetLock id in the host record, so that
	// FleetLock requests with this id reboot this host. Off by default.
	PublishFleetLockID      bool
	SentinelFile            string   // "" disables the file detector
	SentinelCommand         []string // argv; empty disables the command detector
	SentinelCommandInterval time.Duration
	SentinelCommandTimeout  time.Duration
	// Detectors are the reboot-need detectors of the distributions, by kind
	// (DetectorKinds); "auto" stands for those /etc/os-release calls for.
	Detectors []string
	// DetectorRoot is the folder the detectors take for "/" (a fixture tree
	// in tests); DetectorTimeout bounds one run of a detector's program;
	// KernelOnly makes library updates no need (needrestart, rhel).
	DetectorRoot    string
	DetectorTimeout time.Duration
	KernelOnly      bool
	Reboot          RebootConfig
	// PassEnv names secret-bearing environment variables (tokens, secrets,
	// passwords: agent.IsSecretEnv) that hooks, the sentinel command and the reboot
	// command still get; every other one is removed from their environment.
	PassEnv []string
	// RecordFile keeps, across the reboot, the last host record the agent
	// wrote (agent/recordfile.go).
	RecordFile string
	// ServerLockFile keeps, across the reboot of a server host, the IDs of the
	// server reboot locks its agent holds (docs/architecture.md, "Server
	// reboot lock"); ServerLockTTL is those locks' TTL.
	ServerLockFile string
	ServerLockTTL  time.Duration
}

// DetectorKinds are the values of agent.detectors (the agent package's Kind
// constants).
var DetectorKinds = []string{"auto", "debian", "rhel", "suse", "nixos", "rpm-ostree", "kernel", "needrestart"}

// Reboot methods.
const (
	RebootMethodCommand = "command"
	RebootMethodLogind  = "logind"
	RebootMethodSignal  = "signal"
)

// RebootConfig says how the agent reboots its host.
type RebootConfig struct {
	Method      string   // RebootMethodCommand, RebootMethodLogind or RebootMethodSignal
	Command     []string // argv for RebootMethodCommand
	Signal      int      // signal sent to PID 1 for RebootMethodSignal
	Delay       time.Duration
	PreHooks    [][]string // argv lists run before the reboot
	PostHooks   [][]string // argv lists run after boot, before reporting the new boot ID
	HookTimeout time.Duration
	// RecheckInterval is how often a reboot held at a go/no-go (a quorum
	// gate closed, the node not drained as it should be) is checked again.
	RecheckInterval time.Duration
}

// CoordinatorConfig configures the coordinator.
type CoordinatorConfig struct {
	// Enabled makes `rollboot agent` a coordinator candidate too (default
	// false); `rollboot coordinator` is one whatever it says.
	Enabled bool
	LockTTL time.Duration
	// Standbys is the number of standby slots of the election: only their
	// holders contend for the leader lock (0: every candidate contends).
	Standbys       int
	ResyncInterval time.Duration
	RejoinTimeout  time.Duration
	// ServerStableFor: after a reboot, a server must have been stable this long
	// (autopilot's StableSince) before its host's slot is freed.
	ServerStableFor time.Duration
	// LeaderTransferDenied is what to do when a leadership hand-over is refused
	// for lack of permission (Nomad's needs a management token): "continue"
	// (reboot the leader; the cluster elects another) or "hold" (wait).
	LeaderTransferDenied string
	RebootLoopBackoff    time.Duration
	RebootLoopMaxBackoff time.Duration
	// PurgedNodeGrace: how long the node of a host out of service may be gone
	// from Nomad (purged, or replaced by another node) before its slot is
	// released.
	PurgedNodeGrace time.Duration
	HistorySize     int
	// AgentJob is the Nomad job the agents run as, in AgentJobNamespace ("" means
	// nomad.namespace): a host whose node has no running allocation of it is
	// reported "agent missing". "" turns the check off.
	AgentJob          string
	AgentJobNamespace string
	// NodeMeta: the leader publishes each host's state as dynamic node
	// metadata (rollboot_phase, ...). false writes none.
	NodeMeta bool
}

// What to do when a drain reaches its deadline.
const (
	OnTimeoutAbort = "abort"
	OnTimeoutForce = "force"
)

// DrainConfig configures node drains.
type DrainConfig struct {
	Deadline        time.Duration
	OnTimeout       string // OnTimeoutAbort or OnTimeoutForce
	RetryBackoff    time.Duration
	RetryMaxBackoff time.Duration
	// IgnoreSystemJobs and StopJobs are the defaults of the groups' drain
	// blocks (GroupDrainConfig).
	IgnoreSystemJobs bool
	StopJobs         []string
}

// TelemetryConfig configures the Prometheus metrics listener of `rollboot agent`
// and `rollboot coordinator` (docs/metrics.md).
type TelemetryConfig struct {
	// Listen is the host:port /metrics is served on; "" (the default) serves no
	// listener of its own (FleetLock's listener serves /metrics only with
	// fleetlock.serve_metrics).
	Listen string
	// AllowedHosts are host names the status page answers to, beside IP
	// addresses, localhost and the process's own host names: any other Host
	// header is refused (DNS rebinding; docs/status-page.md).
	AllowedHosts []string
}

// FleetLockConfig configures the FleetLock server (docs/fleetlock.md), served by
// `rollboot agent` and `rollboot coordinator` when Enabled.
type FleetLockConfig struct {
	Enabled bool
	Listen  string // host:port
	// PathPrefix is the path of the base URL clients use, such as "/fleet_lock".
	PathPrefix string
	TLSCert    string // PEM certificate; with TLSKey, the server speaks HTTPS
	TLSKey     string
	ClientCA   string // PEM CA: require client certificates signed by it
	// MaxBodyBytes limits a request body (413 above it).
	MaxBodyBytes int
	// AllowedIDs may hold a slot without a Nomad node; every other id must be
	// the meta fleetlock_id of a node (or published by an agent).
	AllowedIDs []string
	// MaxNodelessSlots bounds the slots of a group held by hosts without a node.
	MaxNodelessSlots int
	// RequestTimeout bounds the handling of one request (500 after it).
	RequestTimeout time.Duration
	// RateLimit is the number of requests per second answered per client (0:
	// no limit).
	RateLimit int
	// ClientCertID says where a client certificate must name the id it asks
	// for (with client_ca): "san_or_cn", "san", "cn" or "none".
	ClientCertID string
	// RecordGrace is how long a record the server wrote may stay without a
	// node or allow-list entry behind it before it is deleted.
	RecordGrace time.Duration
	// ServeMetrics serves /metrics on the FleetLock listener too (off: only
	// on the telemetry listener).
	ServeMetrics bool
}

// GroupConfig is one `group "name" {}` block.
type GroupConfig struct {
	Name string
	// Filter is a go-bexpr expression over the Nomad node; "" matches
	// every node.
	Filter      string
	Concurrency int
	// MaxUnavailable is "" or a percentage such as "25%".
	MaxUnavailable string
	// Windows names the windows that apply; empty means all windows.
	Windows []string
	// Settle is the least time between one host of the group coming back (its
	// cycle ending) and the next one starting; 0: none.
	Settle time.Duration
	// HostsWithoutNode names the hosts that run no Nomad client and belong to
	// this group (storage boxes, server-only hosts, FleetLock clients): the
	// operator's backing for a host record that no Nomad node corroborates.
	HostsWithoutNode []string
	// MaxUptime: a host of the group up longer than this (its jitter added)
	// needs a reboot; 0: no limit.
	MaxUptime time.Duration
	// Singletons is "hold" (a node running the only instance of a task group
	// with count = 1 waits for `rollboot approve`) or "allow" (drained as any).
	Singletons string
	// Approval is "none", "manual" (a host whose turn comes awaits `rollboot
	// approve`) or "webhook" (or the approval webhook's 2xx).
	Approval string
	// Drain and Healthy are the group's drain and healthy blocks, each value
	// the top-level one's unless the group sets it (healthy.go).
	Drain   GroupDrainConfig
	Healthy HealthyConfig
	// Silence is the group's silence block (silence.go).
	Silence SilenceConfig
	// Canary is the group's canary block; After the groups that must have
	// finished a wave, AfterSoak how long before (wave.go).
	Canary    CanaryConfig
	After     []string
	AfterSoak time.Duration
	// FailureBudget is the group's failure budget (budgets.go).
	FailureBudget FailureBudgetConfig
}

// WindowConfig is one `window "name" {}` block.
type WindowConfig struct {
	Name     string
	Days     []string // day names: "mon" or "monday", any case
	Start    string   // "HH:MM" or "HH:MM:SS"
	End      string   // "HH:MM", "HH:MM:SS" or "24:00"; earlier than Start crosses midnight
	TimeZone string   // IANA name
	// Monthly, instead of Days: the days of each month it opens on ("mon#2",
	// "1", "last"), moved by OffsetDays.
	Monthly    []string
	OffsetDays int
}

// Default returns the default configuration: every setting's default, from
// its block's table.
func Default() *Config {
	c := &Config{pos: map[string]hcl.Range{}}
	v := reflect.ValueOf(c).Elem()
	for _, sec := range sections {
		if sec.t.label == "" {
			sec.t.fill(fieldOf(v, sec.field), nil)
		}
	}
	return c
}

// setPos records where the value at key came from.
func (c *Config) setPos(key string, rng hcl.Range) {
	if c.pos == nil {
		c.pos = map[string]hcl.Range{}
	}
	c.pos[key] = rng
}

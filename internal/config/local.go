package config

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The tables of the local file's blocks (the coordinator's also holds the
// rollout rules of the policy). Their structs are in config.go.

var nomadTable = &table{typ: "nomad", of: reflect.TypeFor[NomadConfig](), settings: []setting{
	{name: "address", field: "Address", def: "http://127.0.0.1:4646", env: "NOMAD_ADDR", check: value(nomadAddress),
		doc: "Nomad HTTP API address. Must be a URL starting with `http://`, `https://` (with a host) or " +
			"`unix://`."},
	{name: "token", field: "Token", env: "NOMAD_TOKEN",
		doc: "ACL token (secret ID). **Prefer `NOMAD_TOKEN`** to writing it in a file. Never printed: shown " +
			"as `<redacted>` in logs, errors and `String()`."},
	{name: "region", field: "Region", env: "NOMAD_REGION",
		doc: "Region to talk to; `\"\"` is the agent's own region."},
	{name: "namespace", field: "Namespace", def: "default", env: "NOMAD_NAMESPACE", check: value(nomadNamespace),
		doc: "Namespace holding rollboot's Nomad Variables (its state and leader lock). 1 to 128 letters, " +
			"digits and `-`; `*` is not allowed. Nodes are not namespaced, so this does not limit which " +
			"nodes rollboot manages."},
	{name: "ca_cert", field: "CACert", env: "NOMAD_CACERT",
		doc: "Path to the PEM CA certificate that signed the Nomad servers' certificates."},
	{name: "ca_path", field: "CAPath", env: "NOMAD_CAPATH",
		doc: "Path to a directory of PEM CA certificates, one of which signed the Nomad servers' " +
			"certificates (`ca_cert` wins when both are set, as in the Nomad CLI)."},
	{name: "client_cert", field: "ClientCert", env: "NOMAD_CLIENT_CERT", check: pairedWith("client_key"),
		doc: "Path to the PEM client certificate for mutual TLS. Set with `client_key`, both or neither."},
	{name: "client_key", field: "ClientKey", env: "NOMAD_CLIENT_KEY", check: pairedWith("client_cert"),
		doc: "Path to the PEM client key. Set with `client_cert`, both or neither."},
	{name: "tls_server_name", field: "TLSServerName", env: "NOMAD_TLS_SERVER_NAME",
		doc: "Server name (SNI) to verify the server certificate against, e.g. `server.global.nomad`."},
	{name: "tls_skip_verify", field: "TLSSkipVerify", env: "NOMAD_SKIP_VERIFY",
		doc: "Skip TLS verification. For tests only. `NOMAD_SKIP_VERIFY` must parse as a boolean (`true`, " +
			"`false`, `1`, `0`...); anything else is an error."},
}}

var stateTable = &table{typ: "state", of: reflect.TypeFor[StateConfig](), settings: []setting{
	{name: "prefix", field: "Prefix", def: "rollboot", check: value(statePrefix),
		doc: "Path prefix of rollboot's Nomad Variables (`<prefix>/hosts/<host>`, `<prefix>/plan/<host>`, " +
			"`<prefix>/control`, `<prefix>/requests/<host>`, `<prefix>/policy`, `<prefix>/history/...`, " +
			"`<prefix>/leader`) in `nomad.namespace`. Only letters, digits, `-`, `_`, `~` and `/` (Nomad's " +
			"variable path characters: **no dots**); no leading or trailing `/`, no `//`; not `nomad` nor " +
			"under `nomad/` (reserved by Nomad); at most 64 characters, so that full paths stay under " +
			"Nomad's 128."},
}}

var agentTable = &table{typ: "agent", of: reflect.TypeFor[AgentConfig](), settings: []setting{
	{name: "host", field: "Host", check: value(agentHost),
		doc: "This host's name in rollboot's state. `\"\"` means the OS host name (`os.Hostname()`) at run " +
			"time; leave it empty in a file shared by all hosts. On a Nomad client it must be the node's " +
			"name: the coordinator ignores (and reports) a record whose `node_id` is the node of another " +
			"name. Names containing `~` or `/` are refused (dots are stored as `~` in variable paths); an " +
			"OS host name with them stops the agent at start with that error."},
	{name: "boot_id_file", field: "BootIDFile", def: "/proc/sys/kernel/random/boot_id", check: value(requiredPath("")),
		doc: "File holding the kernel's boot ID, which tells the agent that a reboot happened. Absolute " +
			"path, required."},
	{name: "boot_time_file", field: "BootTimeFile", def: "/proc/stat", check: value(optionalPath("to publish no boot time")),
		doc: "The kernel's `/proc/stat`, whose `btime` line (seconds since the epoch) is when the host booted: " +
			"the agent publishes it in its host record for the groups' `max_uptime`. A file that cannot be " +
			"read or has no `btime` line means no boot time (a warning is logged) and no uptime need for " +
			"this host, never a reboot; `\"\"` publishes none. Absolute path."},
	{name: "machine_id_file", field: "MachineIDFile", def: "/etc/machine-id", check: value(optionalPath("for no FleetLock id")),
		doc: "The machine-id(5) file the agent derives this host's FleetLock id from (the id Zincati sends, " +
			"see [FleetLock](fleetlock.md#identity)), published in its host record when " +
			"`publish_fleetlock_id` is set. A missing or malformed file means no id (a warning is logged); " +
			"`\"\"` disables it. Absolute path."},
	{name: "publish_fleetlock_id", field: "PublishFleetLockID",
		doc: "Publish this host's FleetLock id in its host record, so that FleetLock requests with that id " +
			"reboot this host. Off, FleetLock requests cannot name this host through its agent (an operator " +
			"can still set the node meta `fleetlock_id`)."},
	{name: "sentinel_file", field: "SentinelFile", def: "/var/run/reboot-required", check: value(optionalPath("to disable the file detector")),
		doc: "A reboot is needed while this file exists (Debian/Ubuntu's convention). Absolute path; `\"\"` " +
			"disables the file detector. The agent watches the file's directory with the kernel's file " +
			"notifications (inotify), so the need is published within milliseconds of the file being " +
			"written or removed, and also looks every 10 s, in case a notification is lost. Where the " +
			"directory cannot be watched (it does not exist, or `fs.inotify.max_user_instances` is reached) " +
			"the agent logs `reboot detector polled only` and looks every 500 ms instead; it does too while " +
			"the host's Vault server is sealed, to notice the unseal within 500 ms."},
	{name: "sentinel_command", field: "SentinelCommand", argv: true, check: argvProgram,
		doc: "A command that says whether a reboot is needed: exit status 0 means a reboot is needed. A " +
			"missing program or a timeout is reported as an error, never taken as a reboot request. " +
			"Example: `[\"/usr/local/bin/reboot-needed\"]`. Empty disables the command detector. The " +
			"program must not be `\"\"`."},
	{name: "sentinel_command_interval", field: "SentinelCommandInterval", def: 5 * time.Minute, check: value(positive),
		doc: "How often the sentinel command and the detectors other than `debian` run (they also run when " +
			"the agent starts). > 0."},
	{name: "sentinel_command_timeout", field: "SentinelCommandTimeout", def: 30 * time.Second, check: value(positive),
		doc: "How long one run of the sentinel command may take. > 0."},
	{name: "detectors", field: "Detectors", def: []string{"auto"}, check: each(atElement, oneOf("detector kind", DetectorKinds...)),
		doc: "The distributions' reboot-need detectors, beside `sentinel_file` and `sentinel_command`; " +
			"a reboot is needed when any says so, and the host record shows each one's reason and a " +
			"fingerprint of what the reboot installs (`rollboot status -json`: `reason`, `fingerprint`). " +
			"`debian` is watched as `sentinel_file` is; the others run when the agent starts and every " +
			"`sentinel_command_interval`. `\"debian\"`: `/var/run/reboot-required` exists " +
			"(the packages in `reboot-required.pkgs` are the fingerprint; it replaces `sentinel_file` when " +
			"that names the same file). `\"rhel\"`: `needs-restarting -r` exits 1 (0: no reboot). " +
			"`\"suse\"`: `/run/reboot-needed` exists, or `zypper needs-rebooting` exits 102 (0: no " +
			"reboot). `\"nixos\"`: the kernel, initrd or kernel-modules links of " +
			"`/nix/var/nix/profiles/system` differ from `/run/booted-system`'s. `\"rpm-ostree\"`: " +
			"`rpm-ostree status --json` shows a staged or pending deployment before the booted one. " +
			"`\"kernel\"`: a kernel newer than the running one (`/proc/sys/kernel/osrelease`) is in " +
			"`/boot` or `/lib/modules`, version-sorted. `\"needrestart\"`: `needrestart -b` prints " +
			"`NEEDRESTART-KSTA: 2` or `3`, `NEEDRESTART-UCSTA: 2`, or services to restart (see " +
			"`kernel_only`). `\"auto\"` chooses by `/etc/os-release` (else `/usr/lib/os-release`): " +
			"`rpm-ostree` where `/run/ostree-booted` exists, else by `ID` then `ID_LIKE`: debian and ubuntu " +
			"`debian`, rhel, fedora and centos `rhel`, suse, opensuse* and sle* `suse`, nixos `nixos`, " +
			"any other `kernel`; no os-release file chooses none (logged). `[]` turns them all off. A " +
			"program that is missing, exits with another status or runs past `detector_timeout` is a " +
			"detection error shown in `rollboot status` (`detect_error`), never a reboot; the programs are " +
			"looked for in `/usr/local/sbin`, `/usr/local/bin`, `/usr/sbin`, `/usr/bin`, `/sbin`, `/bin` " +
			"and `/run/current-system/sw/bin` under `detector_root`. A need that is still there right after " +
			"its reboot is held by the reboot-loop guard (`reboot_loop_backoff`); one whose fingerprint " +
			"changed is a new need. Unknown kinds are an error."},
	{name: "detector_root", field: "DetectorRoot", def: "/", check: value(requiredPath("")),
		doc: "The folder the detectors take for `/`: their files (os-release, `/boot`, `/proc/sys/kernel/osrelease`, " +
			"...) and programs are looked for under it. `/` on a host; the emulator's host folder in tests and " +
			"the demo. A program found there still runs as it is, with the agent's own libraries and " +
			"namespaces: a container cannot run the host's tools this way (see the docker job). Absolute path."},
	{name: "detector_timeout", field: "DetectorTimeout", def: time.Minute, check: value(positive),
		doc: "How long one run of a detector's program (`needs-restarting`, `zypper`, `rpm-ostree`, " +
			"`needrestart`) may take; past it the run is killed and is a detection error. > 0."},
	{name: "kernel_only", field: "KernelOnly",
		doc: "Only a kernel (or firmware, microcode) update needs a reboot: `needrestart`'s services using " +
			"outdated libraries are ignored, and an `rhel` need whose listed packages hold no `kernel*`, " +
			"`linux-firmware*` or `microcode*` package is none. Off: those needs reboot the host too."},
	{name: "pass_env", field: "PassEnv", check: each(atElementIndexed, envVarName),
		doc: "Secret-bearing environment variables that the sentinel command, the hooks and the reboot " +
			"command still get, by exact name, e.g. `[\"VAULT_TOKEN\"]`. Every other secret-bearing " +
			"variable of the agent is removed from their environment: any name containing `TOKEN`, " +
			"`SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL`, `PRIVATE_KEY`, `API_KEY`, `ACCESS_KEY` or " +
			"`UNSEAL` (case-insensitive), or ending in `_AUTH` (`NOMAD_HTTP_AUTH`, `CONSUL_HTTP_AUTH`). So " +
			"by default no command sees `NOMAD_TOKEN`, `CONSUL_HTTP_TOKEN` or `VAULT_TOKEN`. Each element " +
			"must be a variable name (letters, digits, `_`): no `NAME=value`, no wildcards."},
	{name: "record_file", field: "RecordFile", def: "/var/lib/rollboot/record.json", check: value(requiredPath(" (the file should outlive a reboot)")),
		doc: "Where the agent keeps a copy of the last host record it wrote (mode 0600 in a directory " +
			"created 0700), so that its next start, after a reboot above all, takes the record from there " +
			"instead of reading it back from Nomad: one request fewer per reboot ([performance](performance.md)). " +
			"It decides nothing: the agent's first write is check-and-set on the index the file keeps, so a " +
			"record written since by anyone makes it read the stored record, as it does when the file is " +
			"missing, unreadable or of another host (logged as a warning); a start with nothing new to write " +
			"(a restart without a reboot) reads it too, so that a record gone from a Nomad whose state went " +
			"back (a snapshot restored) is written again at once. It should outlive a reboot (the " +
			"systemd unit's state directory; with the docker job, a directory of the host mounted into the " +
			"container, or the saving is lost). A failure to write it is logged once and changes nothing " +
			"else. Absolute path."},
	{name: "server_lock_file", field: "ServerLockFile", def: "/var/lib/rollboot/server-lock.json", check: value(requiredPath(" (the file must outlive a reboot)")),
		doc: "Where the agent of a host that runs a Nomad, Consul or Vault server keeps, across the reboot, " +
			"the IDs of the [server reboot locks](architecture.md#server-reboot-lock) it holds (mode 0600 " +
			"in a directory created 0700: a lock ID lets whoever has it release the lock). It must outlive " +
			"a reboot: a path on the host's disk, not a tmpfs, and with the docker job a directory of the " +
			"host mounted into the container. The agent writes it right after taking a lock; if it cannot, " +
			"it gives the lock back and holds the reboot (\"cannot keep the server reboot lock: ...\"). A " +
			"file unreadable at start is logged as an error and removed. A file lost (deleted, on a wiped " +
			"disk) leaves the locks to expire by their TTL: the cluster's other servers wait that long. " +
			"Absolute path. Unused on hosts without servers."},
	{name: "server_lock_ttl", field: "ServerLockTTL", def: 15 * time.Minute, check: value(lockTTL),
		doc: "TTL of the server reboot locks. The agent renews them every quarter of it until its host goes " +
			"down; Nomad frees a lock nobody renews about 2 × TTL after the last renewal, plus the lock " +
			"delay (the smaller of 15s and the TTL), and a Nomad leader election restarts that clock. So a " +
			"host must be back, and its agent started, within 2 × TTL of going down, or another server of " +
			"its cluster may take the lock while it is still down (the coordinator's admission and the " +
			"pre-reboot quorum gate still stand in the way); and a lost lock file delays the cluster's next " +
			"server reboot by up to that long. Between `10s` and `24h` (Nomad's range for lock TTLs)."},
}, nested: []nested{child{t: rebootTable, field: "Reboot"}}}

var rebootTable = &table{typ: "reboot", of: reflect.TypeFor[RebootConfig](), settings: []setting{
	{name: "method", field: "Method", def: RebootMethodCommand, check: value(oneOf("reboot method", RebootMethodCommand, RebootMethodLogind, RebootMethodSignal)),
		doc: "`\"command\"` runs `command`; `\"logind\"` asks systemd-logind over D-Bus " +
			"(`org.freedesktop.login1.Manager.Reboot`); `\"signal\"` sends `signal` to PID 1. Anything else " +
			"is an error."},
	{name: "command", field: "Command", argv: true, def: []string{"systemctl", "reboot"}, check: rebootCommand,
		doc: "The reboot command for `method = \"command\"`; must then be non-empty."},
	{name: "signal", field: "Signal", def: 39, check: value(signalNumber),
		doc: "Signal sent to PID 1 for `method = \"signal\"`. 39 is `SIGRTMIN+5`, which systemd takes as " +
			"\"reboot\". Whole number from 1 to 64."},
	{name: "delay", field: "Delay", check: value(nonNegative),
		doc: "Wait between the end of the pre-reboot hooks and the reboot. >= 0."},
	{name: "pre_hooks", field: "PreHooks", check: each(atElementIndexed, hook),
		doc: "Commands run, in order, once the node is drained and before the reboot, e.g. " +
			"`[[\"/usr/local/bin/notify\", \"rebooting\"]]`. Each hook needs at least its program."},
	{name: "post_hooks", field: "PostHooks", check: each(atElementIndexed, hook),
		doc: "Commands run after boot, before the agent reports the new boot ID (so before the node is made " +
			"eligible again). Each hook needs at least its program."},
	{name: "hook_timeout", field: "HookTimeout", def: 5 * time.Minute, check: value(positive),
		doc: "Time limit for each hook. > 0. A hook that fails or times out ends the attempt (see below)."},
	{name: "recheck_interval", field: "RecheckInterval", def: 5 * time.Second, check: value(positive),
		doc: "How often a reboot held at a go/no-go (before the hooks or at the final one) is checked again. " +
			"> 0."},
}}

// coordinatorTable: the election's settings are local, the rollout rules
// (policy: true) are the policy's.
var coordinatorTable = &table{typ: "coordinator", of: reflect.TypeFor[CoordinatorConfig](), settings: []setting{
	// No agent stands for election unless its configuration says so: a
	// candidate holds the coordinator's rights (docs/deploy.md).
	{name: "enabled", field: "Enabled",
		doc: "Whether this agent is also a candidate in the coordinator election (a Nomad Variable lock at " +
			"`<prefix>/leader`). Off by default: the shipped deployment runs `rollboot coordinator` as its " +
			"own job, the only holder of the coordinator's rights, and its agents are no candidates. `true` " +
			"makes every agent that sets it a candidate, so that a plain system job is the whole deployment " +
			"([every agent a candidate](deploy.md#every-agent-a-candidate-small-clusters)), but then every " +
			"such host holds the coordinator's rights ([deploy](deploy.md#security-model)). `rollboot " +
			"coordinator` stands for election whatever it says."},
	{name: "lock_ttl", field: "LockTTL", def: 15 * time.Second, check: value(lockTTL),
		doc: "TTL of the leader lock. Between `10s` and `24h` (Nomad's range). A dead coordinator is " +
			"replaced after roughly twice this (plus Nomad's lock delay)."},
	{name: "standbys", field: "Standbys", def: DefaultStandbys, check: value(standbys),
		doc: "Standby slots of the election (`<prefix>/standby/<i>`, variable locks with the leader lock's " +
			"TTL). Only a candidate that holds one contends for the leader lock; the others stay quiet and " +
			"now and then try a slot, so an idle cluster costs Nomad the same number of requests whatever " +
			"the number of candidates ([performance](performance.md#the-election-at-rest)). A dead leader " +
			"is replaced by a standby as quickly as before; when the leader and every standby die at once, " +
			"a quiet candidate takes a freed slot seconds after Nomad frees it. With fewer than 15 " +
			"candidates (the census the leader publishes: the hosts whose record shows a candidate agent), " +
			"candidates without a slot contend as with `0`. Between `0` and `16`; `0` makes every candidate " +
			"contend (each one waits on the leader lock for at most 2 × `lock_ttl`, then asks again: " +
			"requests grow with the candidates). Every candidate of a cluster should use the same value."},
	{name: "resync_interval", field: "ResyncInterval", def: 30 * time.Second, check: value(positive),
		doc: "Full reconcile even when nothing changed. The reconciler is level-triggered and does not wait " +
			"for it: a change to a host record, to the control variable (`request`, `cancel`, `pause`, " +
			"`resume`, `release`) or to a Nomad node (and to the allocations of a node whose host waits for " +
			"its system jobs or its workloads to be healthy after its reboot, and to its Consul checks with " +
			"`healthy.consul_checks`) triggers a pass at once; a pass that changed something is followed by " +
			"another at once (up to 20 in a row when nothing else changes meanwhile: " +
			"`rollboot_coordinator_pass_spins_total`); a backoff, drain deadline or rejoin timeout gets a " +
			"pass when it runs out; a failed pass is retried after 1s, doubling up to this interval (a change seen meanwhile waits for that retry). A pass " +
			"that takes longer than this is logged as a warning and counted " +
			"(`rollboot_coordinator_pass_overruns_total`). > 0."},
	{name: "agent_job", field: "AgentJob", def: "rollboot", check: value(jobID),
		doc: "The Nomad job the agents run as. The coordinator watches its allocations (one blocking query) " +
			"and reports a host whose agent does not run as \"agent missing\" in `rollboot status` and its " +
			"log, and does not grant it a slot. When the job has no allocations (agents run as systemd " +
			"services), nothing is reported and `status` says so. `\"\"` turns the check off (mixed " +
			"deployments, where some Nomad clients run the agent as a service). No spaces."},
	{name: "agent_job_namespace", field: "AgentJobNamespace", check: value(agentJobNamespace),
		doc: "Namespace of `agent_job`; `\"\"` means `nomad.namespace`. The coordinator's and the operator's " +
			"tokens need `read-job` there."},
	{name: "node_meta", field: "NodeMeta", def: true,
		doc: "Whether the leading coordinator publishes each host's state on its Nomad node as dynamic node " +
			"metadata (`rollboot_phase`, `rollboot_reboot_required`, `rollboot_last_reboot`; " +
			"[deploy](deploy.md#node-metadata)). `false` writes none and leaves what was written before " +
			"(remove it with `nomad node meta apply -unset`). Every candidate of a cluster should use the " +
			"same value."},
	{name: "rejoin_timeout", field: "RejoinTimeout", policy: true, def: 30 * time.Minute, check: value(positive),
		doc: "A host that does not come back with a new boot ID and a `ready` node within this time after " +
			"its reboot is marked `stuck`: its slot stays taken and an alert is raised. An agent that " +
			"holds its reboot this long ends the attempt instead (history `held`; the node is given back " +
			"and the host backs off). > 0."},
	{name: "server_stable_for", field: "ServerStableFor", policy: true, def: 10 * time.Second, check: value(nonNegative),
		doc: "After a reboot, each Nomad, Consul and Vault server on the host must have been stable this " +
			"long (autopilot's `StableSince`), besides healthy, back in its Raft configuration and a voter " +
			"again (autopilot promotes a server that rejoined as a non-voter after its own stabilization " +
			"time), before the host's slot is freed. A leader change restarts every `StableSince`. >= 0."},
	{name: "leader_transfer_denied", field: "LeaderTransferDenied", policy: true, def: "continue", check: value(leaderTransferDenied),
		doc: "What to do when handing the leadership over before a server's reboot is refused for lack of " +
			"permission (Nomad's transfer needs a management token; Vault's step-down `update`+`sudo` on " +
			"`sys/step-down`): `\"continue\"` reboots the leader and lets the cluster elect another (logged " +
			"as an error), `\"hold\"` keeps the host waiting with the reason in `rollboot status`."},
	{name: "reboot_loop_backoff", field: "RebootLoopBackoff", policy: true, def: time.Hour, check: value(positive),
		doc: "A host that needs a reboot again right after one waits this long, doubling on each repetition. " +
			"> 0."},
	{name: "reboot_loop_max_backoff", field: "RebootLoopMaxBackoff", policy: true, def: 24 * time.Hour, check: notBelow("reboot_loop_backoff"),
		doc: "Upper bound of that wait. Not less than `reboot_loop_backoff`."},
	{name: "purged_node_grace", field: "PurgedNodeGrace", policy: true, def: 5 * time.Minute, check: value(nonNegative),
		doc: "A host out of service whose Nomad node is gone (purged with `nomad node purge`, garbage-collected, " +
			"renamed, or down while a node registered after it carries the host's name: a replaced machine) " +
			"keeps its slot this long, then the slot is released: history `node_gone` with the reason, the " +
			"`node_gone` notification, nothing done to any node, and the host backs off as after a failed " +
			"attempt. `rollboot status` shows the host waiting (`the node is gone: ...; the slot is released " +
			"at ...`, `rollboot_hosts_waiting{reason=\"node_gone\"}`) meanwhile. Decided from Nomad's node " +
			"list only: a node listed again (a live client registers again under its ID) clears it, and a " +
			"host that runs servers keeps its slot (its clusters say when it is back). `rollboot forget " +
			"HOST` then removes a host gone for good. >= 0; `0` releases at the first pass that sees it."},
	{name: "history_size", field: "HistorySize", policy: true, def: 200, check: value(atLeast(1, "")),
		doc: "Number of finished reboots kept in `<prefix>/history`. At least 1."},
}}

var fleetlockTable = &table{typ: "fleetlock", of: reflect.TypeFor[FleetLockConfig](), settings: []setting{
	{name: "enabled", field: "Enabled",
		doc: "Serve FleetLock."},
	{name: "listen", field: "Listen", def: "127.0.0.1:7777", check: value(listenAddr("7777")),
		doc: "`host:port` to listen on (`\":7777\"` for every address: only with TLS and a firewall, see " +
			"[FleetLock](fleetlock.md#enable-it)). It answers only FleetLock, unless `serve_metrics` is " +
			"set."},
	{name: "path_prefix", field: "PathPrefix", check: value(pathPrefix),
		doc: "Path of the base URL, such as `\"/fleet_lock\"`: the endpoints are then " +
			"`/fleet_lock/v1/pre-reboot` and `/fleet_lock/v1/steady-state`. Must start with `/`; not " +
			"`/metrics` (kept free for `serve_metrics`)."},
	{name: "tls_cert", field: "TLSCert", check: pairedWith("tls_key"),
		doc: "PEM certificate file: with `tls_key`, the server speaks HTTPS. Set both or neither."},
	{name: "tls_key", field: "TLSKey", check: pairedWith("tls_cert"),
		doc: "PEM key file of `tls_cert`."},
	{name: "client_ca", field: "ClientCA", check: needsTLS,
		doc: "PEM CA file: require client certificates signed by it (mutual TLS). Needs `tls_cert`."},
	{name: "max_body_bytes", field: "MaxBodyBytes", def: 64 << 10, check: value(bodyLimit),
		doc: "Largest request body; a larger one gets 413 `body_too_large`. From 256 to 16777216."},
	{name: "allowed_ids", field: "AllowedIDs", check: each(atList, fleetlockID),
		doc: "FleetLock ids that may hold a slot without a Nomad node (as host `fleetlock-<id>`). Every " +
			"other id must be the meta `fleetlock_id` of a node, or be published by an agent with " +
			"`publish_fleetlock_id` in a record naming its own node; an id nothing backs gets 403 " +
			"`unknown_id` and is not stored. An id both here and in a node's meta gets 409 " +
			"`identity_conflict`; a host record claiming an id of this list is ignored (see " +
			"[Identity](fleetlock.md#identity)). Each must be a valid id (letters, digits, `.`, `-`, `_`, " +
			"up to 64)."},
	{name: "max_nodeless_slots", field: "MaxNodelessSlots", def: 1, check: value(atLeast(1, " (an empty allowed_ids already admits no host without a node)")),
		doc: "Most slots of one group that hosts without a node may hold or ask for at once; a further one " +
			"gets 423 `waiting_for_slot` and its request is not stored. At least 1."},
	{name: "request_timeout", field: "RequestTimeout", def: 20 * time.Second, check: value(requestTimeout),
		doc: "Deadline of one request. When Nomad does not answer in time the client gets 500 " +
			"`internal_error` (and retries), instead of a connection closed by the server's 60s write " +
			"timeout. From 1s to 50s."},
	{name: "rate_limit", field: "RateLimit", def: 20, check: value(rateLimit),
		doc: "FleetLock requests answered per second to each client, in bursts of up to twice as many; more " +
			"get 429 `rate_limited` before any Nomad call. A client is its certificate with `client_ca`, " +
			"else its source address (clients behind one proxy or NAT share one budget). Counted only once " +
			"the request is well formed and, with `client_ca`, its certificate names the id, so one " +
			"client's flood never takes another's budget. Up to 4096 clients are tracked at once (the " +
			"longest idle forgotten first). `0`: no limit. Not negative."},
	{name: "client_cert_id", field: "ClientCertID", def: "san_or_cn", check: value(oneOf("", "san_or_cn", "san", "cn", "none")),
		doc: "With `client_ca`: where the client certificate must name the id it asks for: `\"san_or_cn\"` " +
			"(a DNS or URI subject alternative name, or the subject common name), `\"san\"`, `\"cn\"`, or " +
			"`\"none\"` (any id). A mismatch gets 403 `forbidden`. Ignored without `client_ca`."},
	{name: "record_grace", field: "RecordGrace", def: time.Hour, check: value(recordGrace),
		doc: "A host record the FleetLock server wrote whose id no longer maps to its host (node meta " +
			"removed, node gone, id off the allow-list) is deleted, with its FleetLock request, once it " +
			"stayed so this long and holds no slot. Looked for every quarter of it (1s to 10m). > 0."},
	{name: "serve_metrics", field: "ServeMetrics",
		doc: "Serve `/metrics` (Prometheus, the whole process's metrics, as on the " +
			"[`telemetry`](#telemetry-the-metrics-listener) listener) on the FleetLock listener too. Off, " +
			"`/metrics` there is 404 `not_found`: the port faces the machines and the metrics name every " +
			"host; scrape the `telemetry` listener instead."},
}}

var telemetryTable = &table{typ: "telemetry", of: reflect.TypeFor[TelemetryConfig](), settings: []setting{
	{name: "listen", field: "Listen", check: value(optional(listenAddr("9464"))),
		doc: "`host:port` on which `rollboot agent` and `rollboot coordinator` serve their Prometheus " +
			"metrics at `/metrics` ([Metrics](metrics.md)) and, in a coordinator candidate " +
			"(`coordinator.enabled`), the read-only [status page](status-page.md) at `/`. `\"\"`: no " +
			"listener of its own (FleetLock's listener serves the same metrics only with " +
			"`fleetlock.serve_metrics`, and never the page). Keep it on localhost or behind a firewall: the " +
			"metrics and the page name hosts."},
	{name: "allowed_hosts", field: "AllowedHosts", check: each(atElement, dnsName),
		doc: "Host names the [status page](status-page.md#the-names-it-answers-to) answers to, beside IP " +
			"addresses, `localhost`, the names of the host the process runs on and the host of `listen`: " +
			"the name a reverse proxy passes on, or a Consul DNS name such as " +
			"`\"rollboot.service.consul\"`. A request naming any other host gets 421 (a defence against DNS " +
			"rebinding). Each must be a DNS name, without a port or wildcard (`\"a.example:9464\"` and " +
			"`\"*.example\"` are errors at their `file:line:col`). `/metrics` is not checked."},
}}

// Limits checked by Compile.
const (
	// MinLockTTL and MaxLockTTL are the range Nomad accepts for a variable
	// lock's TTL.
	MinLockTTL = 10 * time.Second
	MaxLockTTL = 24 * time.Hour
	// DefaultStandbys and MaxStandbys are the default and the largest number
	// of standby slots of the coordinator election.
	DefaultStandbys = 2
	MaxStandbys     = 16
	// MaxPrefixLength keeps rollboot's variable paths (prefix, then for
	// example "/hosts/<host>") under Nomad's 128-character limit.
	MaxPrefixLength = 64
	// MinFleetLockBody and MaxFleetLockBody are the limits of
	// fleetlock.max_body_bytes.
	MinFleetLockBody = 256
	MaxFleetLockBody = 16 << 20
	// MaxFleetLockRequestTimeout keeps fleetlock.request_timeout below the
	// FleetLock server's write timeout (60s), so that a slow answer is still
	// written.
	MaxFleetLockRequestTimeout = 50 * time.Second
)

func nomadAddress(addr string) error {
	if addr == "" {
		return fmt.Errorf("must not be empty")
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return fmt.Errorf("invalid URL: %v", unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix":
		return fmt.Errorf("%q must start with http://, https:// or unix://", u.Redacted())
	case u.Scheme != "unix" && u.Host == "":
		return fmt.Errorf("%q has no host", u.Redacted())
	}
	return nil
}

// unwrapURLError drops url.Error's repetition of the URL, which could hold
// credentials.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func nomadNamespace(ns string) error {
	if !validNamespace(ns) {
		return fmt.Errorf("invalid namespace %q: use 1 to 128 letters, digits and dashes", ns)
	}
	return nil
}

// validNamespace reports whether s is a Nomad namespace name: 1 to 128 of
// [a-zA-Z0-9-]. Not a regexp: ^[a-zA-Z0-9-]{1,128}$ compiles to 128 copies of
// its class, about 100 KB allocated at the start of every process.
func validNamespace(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// variablePathRE is the pattern of Nomad variable paths: ^[a-zA-Z0-9-_~/]{1,128}$, no dots.
var variablePathRE = regexp.MustCompile(`^[a-zA-Z0-9\-_~/]+$`)

func statePrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("must not be empty")
	case !variablePathRE.MatchString(p):
		return fmt.Errorf("invalid variable path %q: use only letters, digits and - _ ~ / (no dots)", p)
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q must not start or end with a slash", p)
	case strings.Contains(p, "//"):
		return fmt.Errorf("%q must not contain an empty path segment (//)", p)
	case p == "nomad" || strings.HasPrefix(p, "nomad/"):
		return fmt.Errorf("%q is under nomad/, which Nomad reserves", p)
	case len(p) > MaxPrefixLength:
		return fmt.Errorf("%q is longer than %d characters", p, MaxPrefixLength)
	}
	return nil
}

func agentHost(h string) error {
	if strings.ContainsAny(h, "~/") {
		return fmt.Errorf(`%q contains "~" or "/": not allowed in a host name (rollboot stores dots as "~" in variable paths)`, h)
	}
	return nil
}

// envName is a portable environment variable name (POSIX: letters, digits and
// underscores, not starting with a digit).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envVarName checks an element of agent.pass_env: a variable name, not a
// NAME=VALUE pair or a pattern.
func envVarName(n string) error {
	if !envName.MatchString(n) {
		return fmt.Errorf("%q is not an environment variable name: write the name alone, such as \"VAULT_TOKEN\" (letters, digits and _, no = and no wildcards)", n)
	}
	return nil
}

func lockTTL(d time.Duration) error {
	if d < MinLockTTL || d > MaxLockTTL {
		return fmt.Errorf("must be between %s and %s (Nomad's range for lock TTLs), got %s", FormatDuration(MinLockTTL), FormatDuration(MaxLockTTL), FormatDuration(d))
	}
	return nil
}

// rebootCommand checks agent.reboot.command: a program, given when the method
// runs it.
func rebootCommand(val any, in siblings) error {
	if method, ok := in.get("method"); ok && method == RebootMethodCommand && len(val.([]string)) == 0 {
		return fmt.Errorf(`must not be empty when method = "command"`)
	}
	return argvProgram(val, in)
}

func signalNumber(n int) error {
	if n < 1 || n > 64 {
		return fmt.Errorf("must be a signal number from 1 to 64, got %d", n)
	}
	return nil
}

// hook checks an element of pre_hooks or post_hooks.
func hook(argv []string) error {
	switch {
	case len(argv) == 0:
		return fmt.Errorf("a hook must have at least the program to run")
	case argv[0] == "":
		return fmt.Errorf("the program (first element) of a hook must not be empty")
	}
	return nil
}

func standbys(n int) error {
	if n < 0 || n > MaxStandbys {
		return fmt.Errorf("must be between 0 and %d, got %d", MaxStandbys, n)
	}
	return nil
}

func jobID(id string) error {
	if strings.ContainsAny(id, " \x00") {
		return fmt.Errorf("invalid job ID %q: no spaces or null characters (\"\" turns the check off)", id)
	}
	return nil
}

func agentJobNamespace(ns string) error {
	if ns != "" && !validNamespace(ns) {
		return fmt.Errorf("invalid namespace %q: use 1 to 128 letters, digits and dashes (\"\" means nomad.namespace)", ns)
	}
	return nil
}

func leaderTransferDenied(s string) error {
	if s != "continue" && s != "hold" {
		return fmt.Errorf("must be \"continue\" or \"hold\", got %q", s)
	}
	return nil
}

// listenAddr checks a listener's host:port (port is the example given).
func listenAddr(port string) func(string) error {
	return func(addr string) error {
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("invalid address %q: use host:port such as \"127.0.0.1:%s\" or \":%s\"", addr, port, port)
		}
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("invalid port %q in %q: use a number from 0 to 65535", p, addr)
		}
		if strings.ContainsAny(host, "/ ") {
			return fmt.Errorf("invalid host %q in %q", host, addr)
		}
		return nil
	}
}

func pathPrefix(p string) error {
	switch {
	case p == "":
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q must start with a slash, such as \"/fleet_lock\"", p)
	case strings.ContainsAny(p, "?#% "):
		return fmt.Errorf("%q must be a plain URL path (no ?, #, %% or spaces)", p)
	case strings.TrimRight(p, "/") == "/metrics" || strings.HasPrefix(p, "/metrics/"):
		return fmt.Errorf("%q collides with /metrics (served on the same listener with serve_metrics)", p)
	}
	return nil
}

// needsTLS checks fleetlock.client_ca: client certificates come with TLS.
func needsTLS(val any, in siblings) error {
	if cert, _ := in.get("tls_cert"); val != "" && cert == "" {
		return fmt.Errorf("client certificates need TLS: set tls_cert and tls_key too")
	}
	return nil
}

func bodyLimit(n int) error {
	if n < MinFleetLockBody || n > MaxFleetLockBody {
		return fmt.Errorf("must be between %d and %d, got %d", MinFleetLockBody, MaxFleetLockBody, n)
	}
	return nil
}

// fleetlockIDRE is the pattern of a FleetLock id (as the server accepts it).
var fleetlockIDRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func fleetlockID(id string) error {
	if len(id) > 64 || !fleetlockIDRE.MatchString(id) {
		return fmt.Errorf("%q is not a FleetLock id: use 1 to 64 letters, digits, dots, dashes and underscores", id)
	}
	return nil
}

func requestTimeout(d time.Duration) error {
	if d < time.Second || d > MaxFleetLockRequestTimeout {
		return fmt.Errorf("must be between 1s and %s (below the server's 60s write timeout), got %s", MaxFleetLockRequestTimeout, d)
	}
	return nil
}

func rateLimit(n int) error {
	if n < 0 {
		return fmt.Errorf("must be 0 (no limit) or more, got %d", n)
	}
	return nil
}

func recordGrace(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", d)
	}
	return nil
}

// hostNameRE is a DNS name: labels of letters, digits, "-" and "_", dotted.
var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$`)

// dnsName checks an element of telemetry.allowed_hosts.
func dnsName(h string) error {
	if len(h) > 253 || !hostNameRE.MatchString(h) {
		return fmt.Errorf(`%q is not a host name: list names such as "rollboot.service.consul", without a port or wildcard (IP addresses and localhost are always allowed)`, h)
	}
	return nil
}

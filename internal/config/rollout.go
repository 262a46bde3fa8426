package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// The tables of the rollout policy's drain, group and window blocks. Their
// structs are in config.go, but for a group's drain block (healthy.go).

var drainTable = &table{typ: "drain", of: reflect.TypeFor[DrainConfig](), settings: []setting{
	{name: "deadline", field: "Deadline", def: time.Hour, check: value(positive),
		doc: "Nomad drain deadline; after it, remaining allocations are handled per `on_timeout`. > 0. A " +
			"drain only starts when the maintenance window stays open at least this long (see " +
			"[Windows](#window-name-maintenance-windows)). A group's `drain` block may set its own."},
	{name: "on_timeout", field: "OnTimeout", def: OnTimeoutAbort, check: value(oneOf("value", OnTimeoutAbort, OnTimeoutForce)),
		doc: "`\"abort\"`: cancel the drain, restore the node's eligibility, back off and retry later. " +
			"`\"force\"`: let Nomad stop the remaining allocations and reboot anyway."},
	{name: "retry_backoff", field: "RetryBackoff", def: 5 * time.Minute, check: value(positive),
		doc: "First wait after an aborted drain, doubling on each further failure. > 0."},
	{name: "retry_max_backoff", field: "RetryMaxBackoff", def: time.Hour, check: notBelow("retry_backoff"),
		doc: "Upper bound of that wait. Not less than `retry_backoff`."},
	{name: "ignore_system_jobs", field: "IgnoreSystemJobs", def: true,
		doc: "The drain leaves the node's system jobs running (Nomad's `-ignore-system`). `false` drains " +
			"them too, after the other allocations, as Nomad does. This is safe only where rollboot's agent " +
			"does not run as a system job on the node: a host whose agent does (its record names the " +
			"agent's job, and that job is a system job running on the node) is held before its drain with " +
			"the reason `drain.ignore_system_jobs = false would stop rollboot's agent (system job …)`, " +
			"since the drain would stop the agent and nobody would reboot the host. Use it for groups whose " +
			"agents run outside Nomad (systemd). The system jobs drained come back once the node is " +
			"eligible again, and the host waits for them as usual."},
	{name: "stop_jobs", field: "StopJobs", check: value(stopJobs),
		doc: "Jobs whose allocations on the node are **stopped** rather than migrated: `\"job\"` (in any " +
			"namespace) or `\"namespace/job\"`. Just before the drain starts, rollboot marks the node " +
			"ineligible and stops them with Nomad's alloc stop (`POST /v1/allocation/:id/stop`): Nomad " +
			"stops each at once and places its replacement on another node, without the job's `migrate` " +
			"block (`max_parallel`, waiting for the replacement to be healthy), which the drain follows for " +
			"the others. For a cache or a batch job that can start over elsewhere. Needs the " +
			"`alloc-lifecycle` capability in the jobs' namespaces, which the shipped coordinator policies " +
			"do not grant (add it, see [deploy.md](deploy.md)); when a stop fails, the error is logged and " +
			"retried, and an allocation still running when the drain starts is migrated by it like any " +
			"other."},
}}

// groupDrainTable is a group's drain block: some of the drain block's settings.
var groupDrainTable = drainTable.only(reflect.TypeFor[GroupDrainConfig](), "deadline", "ignore_system_jobs", "stop_jobs")

var groupTable = &table{typ: "group", of: reflect.TypeFor[GroupConfig](), label: "Name",
	labelDoc: "The group's name. Required, unique, not `default`.",
	settings: append([]setting{
		{name: "filter", field: "Filter", check: value(nodeFilter),
			doc: "A [go-bexpr](https://github.com/hashicorp/go-bexpr) expression over the Nomad node, the syntax " +
				"of `nomad node status -filter`. Selectors are the node's fields as the API returns them: " +
				"`NodePool`, `Datacenter`, `NodeClass`, `Name`, `Status`, `SchedulingEligibility`, `Meta.<key>` " +
				"or `Meta[\"<key>\"]`, `Attributes[\"<key>\"]`, `Drivers.<name>.Healthy`, ... Examples: " +
				"`NodePool == \"batch\"`, `Meta.rack == \"r1\"`, `Attributes[\"unique.hostname\"] matches " +
				"\"^web-\"`, `\"gpu\" in NodeClass`. The syntax and the field names are checked when the file " +
				"is loaded (a misspelt field is an error); map keys are not, as nodes differ. On a node where " +
				"the expression fails to evaluate, the group does not match and the error is reported. `\"\"` " +
				"matches every node; a group after such a group could never match and is an error."},
		{name: "concurrency", field: "Concurrency", def: 1, check: value(atLeast(1, "")),
			doc: "How many of the group's hosts may be out of service because of rollboot at once (draining, " +
				"drained, rebooting, rejoining or stuck). At least 1."},
		{name: "max_unavailable", field: "MaxUnavailable", check: value(percent),
			doc: "Optional percentage, `\"1%\"` to `\"100%\"`, of the group's nodes that may be unavailable at " +
				"once **for any reason**: rollboot's own plus nodes that are down or ineligible without " +
				"rollboot. The limit is `floor(nodes × percent / 100)`, but at least 1, so a small group can " +
				"still reboot one host at a time. A host only starts when both this and `concurrency` allow it. " +
				"`\"\"` means no such limit."},
		// The windows named and the hosts listed are checked against the other
		// blocks: validator.groups.
		{name: "windows", field: "Windows",
			doc: "Names of the `window` blocks in which the group's drains may start. Each must be defined. " +
				"Empty means the default: all windows in the file, or always open if there are none. " +
				"`policy validate` and `policy apply` warn of a group that inherits every window while another " +
				"group names its own: windowing one group then closes the others outside those windows. " +
				"`policy apply`'s diff shows each group's effective windows (`group \"x\".effective_windows`) " +
				"and `plan` shows them under each group."},
		{name: "settle", field: "Settle", check: value(nonNegative),
			doc: "Least time between one host of the group coming back (the end of its cycle: rejoined, eligible " +
				"again, its servers stable) and the next host of the group starting. While it runs, the group's " +
				"pending hosts wait with the reason \"settling\". With `concurrency` above 1 it still spaces " +
				"the starts. >= 0."},
		{name: "max_uptime", field: "MaxUptime", check: value(nonNegative),
			doc: "A host of the group that has been up longer than this needs a reboot, even with no package " +
				"need, e.g. `\"720h\"` (30 days) for a compliance rule or a kernel live-patch limit. Each " +
				"host's limit is this plus a share of 10 % of it fixed by a hash of its name, so that a group " +
				"booted together asks over that spread rather than at once. Its reason reads `uptime 31.4d > " +
				"30d` in `rollboot status`, `plan` and `history`; it has the lowest priority: a package need or " +
				"a request is the reason shown when there is one. The uptime is reckoned from the boot time " +
				"the host's agent publishes (`agent.boot_time_file`): a host's claim, which can reboot only " +
				"that host, since its agent refuses a grant for a boot time that is not its own. A host " +
				"without a published boot time (an agent that cannot read it, a FleetLock client) has no " +
				"uptime need. `rollboot cancel` suppresses it until the host's next boot. `0` (the default) " +
				"means no limit. The default group has none: to limit every node, add a group whose " +
				"`filter` is `\"\"`. >= 0."},
		{name: "hosts_without_node", field: "HostsWithoutNode", check: each(atElement, checkStorableHost),
			doc: "Hosts that run no Nomad client and belong to this group: storage boxes, hosts that run only " +
				"servers outside Nomad's view, FleetLock clients whose group the operator fixes. A host record " +
				"without a Nomad node is used only when a group lists it here, a server cluster lists it as a " +
				"member, or its FleetLock id is on `fleetlock.allowed_ids` (docs/architecture.md, \"Trust\"); " +
				"any other is left out and counted (`rollboot_unbacked_host_records`). Each entry must be a " +
				"host name rollboot can store (no `~` or `/`), listed in one group only. A listed host that " +
				"goes down and does not come back within `rejoin_timeout` keeps no slot: its cycle is ended as " +
				"`abandoned` and it backs off."},
		{name: "singletons", field: "Singletons", def: "allow", check: value(oneOf("singletons", "", "allow", "hold")),
			doc: "What to do with a node that runs the only instance of a task group whose count is 1 (a " +
				"service or batch job; no other live, healthy allocation of that group elsewhere), which a " +
				"Nomad drain stops before its replacement runs. `\"allow\"` (the default, as before this " +
				"setting) drains it like any node. `\"hold\"` keeps the host pending, before it takes a slot, " +
				"with the jobs named in `rollboot status` and `plan` (`runs the only instance of job group " +
				"web.api (count = 1): a drain stops it; rollboot approve HOST lets it drain`, " +
				"`rollboot_hosts_waiting{reason=\"singleton\"}`), until the singleton goes away or an operator " +
				"runs `rollboot approve HOST` (valid for `-for`, 1h by default). A read that fails holds " +
				"(`workload_unknown`). Each held host costs two reads a pass and again every 5s: its node's " +
				"allocations and those of each singleton job. Hosts in no group (the default group) are " +
				"`\"allow\"`: a group with `filter = \"\"` and `singletons = \"hold\"` holds them all."},
		{name: "approval", field: "Approval", def: "none", check: value(oneOf("approval", "", "none", "manual", "webhook")),
			doc: "`\"none\"` (the default): a host goes when its turn comes. `\"manual\"`: a host whose turn comes " +
				"(every budget, window and gate lets it go) does not drain but awaits approval, shown as " +
				"`awaiting_approval` by `rollboot status` (with the command to run), `awaiting approval` by " +
				"`rollboot plan`, on the status page, in `rollboot_hosts_waiting{reason=\"awaiting_approval\"}` " +
				"and by the notification `awaiting_approval`, until an operator runs `rollboot approve HOST` or " +
				"`rollboot approve -group G` (recorded with the token's name in the plan and the history " +
				"record). It keeps its group's slot and its place in line while it awaits, for `approval.hold_slot`. `\"webhook\"`: " +
				"the same, and the coordinator asks the approval webhook (`approval.webhook`), whose 2xx " +
				"approves; an operator's approval also does. An approval is consumed by the cycle it let " +
				"start: it ends with that cycle (or at its `-for`), and the host's next reboot awaits a new " +
				"one. An approval that cannot be read holds (fail closed). Hosts in no group (the default " +
				"group) need none."},
	}, afterSettings...),
	nested: []nested{
		child{t: canaryTable, field: "Canary"}, // its own table: docs/configuration.md, "Waves"
		child{t: groupDrainTable, field: "Drain", inherit: func(c *Config) any { return c.groupDrain() },
			defDoc: "the top-level `drain`",
			doc: "The group's `deadline` (also what its windows must leave room for), `ignore_system_jobs` and " +
				"`stop_jobs`, each as in [`drain`](#drain-draining-a-node-before-its-reboot); what the block does " +
				"not set comes from the top-level `drain` block. A host keeps the options of the group its cycle " +
				"started in."},
		child{t: healthyTable, field: "Healthy", inherit: func(c *Config) any { return c.Healthy },
			defDoc: "the top-level `healthy`",
			doc: "The group's `deadline`, `on_deadline` and `consul_checks`, as in " +
				"[`healthy`](#healthy-when-a-rebooted-host-is-back); what the block does not set comes from the " +
				"top-level `healthy` block."},
		child{t: silenceTable, field: "Silence", inherit: func(c *Config) any { return c.Silence },
			defDoc: "the top-level `silence`",
			doc: "The group's `matchers`, `duration` and `tail`, as in " +
				"[`silence`](#silence-alertmanager-silences-while-a-host-is-out); what the block does not set " +
				"comes from the top-level `silence` block. `matchers = []` turns silences off for the group."},
		child{t: failureBudgetTable, field: "FailureBudget", defDoc: "none", inherit: defaultFailureBudget,
			doc: "The group's own failure budget: `max_failures`, `window` and `count` as in " +
				"[`failure_budget`](#failure_budget-halt-after-failed-cycles), counting only the group's cycles; " +
				"it halts only the group (`rollboot resume -group NAME` lifts it). Nothing is inherited from the " +
				"top-level block, which counts every group's failures for the whole rollout."},
	},
}

var windowTable = &table{typ: "window", of: reflect.TypeFor[WindowConfig](), label: "Name",
	labelDoc: "The window's name, referred to by groups. Required, unique.",
	settings: []setting{
		{name: "days", field: "Days", def: allDayNames, defDoc: "all seven days", check: value(weekdays),
			doc: "Days on which the window **opens**, in `time_zone`: `mon`, `tue`, `wed`, `thu`, `fri`, `sat`, " +
				"`sun` or the full English names, any case. At least one. With `monthly`, the window opens on " +
				"the days both name: `monthly = [\"1\"]` with the weekdays is the 1st of the month when it is a " +
				"weekday."},
		{name: "monthly", field: "Monthly", check: value(monthlyDays),
			doc: "The days of each month on which the window opens (of those `days` names), in `time_zone`: " +
				"`\"WEEKDAY#N\"` the Nth weekday of the month (`\"mon#2\"` the second Monday, `#1` to `#5`, or " +
				"`#last`; AWS SSM's `TUE#3`, AKS `relativeMonthly`), `\"N\"` day N of the month (`\"1\"` to `\"31\"`) " +
				"or `\"last\"` the month's last day. A month without the day named (a fifth Monday, a 31st) has no " +
				"opening. `[]` (the default): every one of `days`."},
		{name: "offset_days", field: "OffsetDays", check: offsetDays,
			doc: "With `monthly`: moves each day it names by this many days, into the next or previous month " +
				"if need be (SSM's `ScheduleOffset`). Patch Tuesday, the Tuesday after the second Monday, is " +
				"`monthly = [\"mon#2\"]` with `offset_days = 1`. -27 to 27."},
		{name: "start", field: "Start", required: `"22:00"`, check: value(windowStart),
			doc: "Opening time, `\"HH:MM\"` or `\"HH:MM:SS\"`, 24-hour clock, `00:00` to `23:59:59`."},
		{name: "end", field: "End", required: `"04:00"`, check: windowEnd,
			doc: "Closing time, same format, or `\"24:00\"` for midnight at the end of the day. If it is earlier " +
				"than `start`, the window ends on the next day: `days = [\"mon\"]`, `start = \"22:00\"`, `end = " +
				"\"04:00\"` is open from Monday 22:00 to Tuesday 04:00. Must differ from `start` (for a whole " +
				"day use `\"00:00\"` to `\"24:00\"`)."},
		{name: "time_zone", field: "TimeZone", def: "UTC", check: value(timeZone),
			doc: "IANA time zone name (`\"Europe/Berlin\"`, `\"America/New_York\"`). `\"\"` and `\"Local\"` are " +
				"refused so that the meaning does not depend on the machine the coordinator runs on. The time " +
				"zone database is built into rollboot."},
	},
}

var allDayNames = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

// stopJobs checks a stop_jobs list: each "job" or "namespace/job", none twice.
func stopJobs(jobs []string) error {
	var errs []error
	seen := map[string]bool{}
	for i, j := range jobs {
		ns, id, scoped := strings.Cut(j, "/")
		switch {
		case j == "" || (scoped && (ns == "" || id == "" || strings.Contains(id, "/"))):
			errs = append(errs, elem(i, fmt.Errorf(`%q is not a job: use "job" (any namespace) or "namespace/job"`, j)))
		case seen[j]:
			errs = append(errs, elem(i, fmt.Errorf("job %q is listed twice", j)))
		}
		seen[j] = true
	}
	return errors.Join(errs...)
}

// nodeFilter checks a group's filter: "" or an expression over the node.
func nodeFilter(f string) error {
	if f == "" {
		return nil
	}
	_, err := policy.CompileFilter(f)
	return err
}

func percent(s string) error {
	_, err := policy.ParsePercent(s)
	return err
}

// checkStorableHost checks a host name of hosts_without_node.
func checkStorableHost(h string) error {
	if h == "" || strings.ContainsAny(h, "~/") {
		return fmt.Errorf(`%q is not a host name rollboot can store (empty, or contains "~" or "/")`, h)
	}
	return nil
}

// weekdays checks a window's days: at least one, each a day.
func weekdays(days []string) error {
	if len(days) == 0 {
		return fmt.Errorf("must list at least one day")
	}
	var errs []error
	for i, d := range days {
		if _, err := policy.ParseWeekday(d); err != nil {
			errs = append(errs, elem(i, err))
		}
	}
	return errors.Join(errs...)
}

// clock parses a window's start or end.
func clock(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf(`must not be empty, use HH:MM such as "22:00"`)
	}
	return policy.ParseClock(s)
}

func windowStart(s string) error {
	d, err := clock(s)
	if err == nil && d == 24*time.Hour {
		return fmt.Errorf(`"24:00" can only be an end; a window starting at midnight starts at "00:00"`)
	}
	return err
}

// windowEnd checks a window's end: a time of day other than the start.
func windowEnd(val any, in siblings) error {
	end, err := clock(val.(string))
	if err != nil {
		return err
	}
	s, ok := in.get("start")
	if start, err := clock(s.(string)); ok && err == nil && start != 24*time.Hour && start == end {
		return fmt.Errorf(`start and end are both %s, so the window would be empty; for a whole day use start = "00:00" and end = "24:00"`, s)
	}
	return nil
}

func timeZone(tz string) error {
	_, err := policy.ParseTimeZone(tz)
	return err
}

// monthlyDays checks a window's monthly rules: each one a day of the month.
func monthlyDays(rules []string) error {
	var errs []error
	for i, r := range rules {
		if _, err := policy.ParseMonthDay(r); err != nil {
			errs = append(errs, elem(i, err))
		}
	}
	return errors.Join(errs...)
}

// offsetDays checks a monthly window's offset: within bounds, and only with
// monthly.
func offsetDays(val any, in siblings) error {
	n := val.(int)
	if n < -policy.MaxOffsetDays || n > policy.MaxOffsetDays {
		return fmt.Errorf("must be -%d to %d days, got %d", policy.MaxOffsetDays, policy.MaxOffsetDays, n)
	}
	if m, ok := in.get("monthly"); n != 0 && ok && len(m.([]string)) == 0 {
		return fmt.Errorf(`moves the days of monthly, which is empty: for example monthly = ["mon#2"] with offset_days = 1 opens on the Tuesday after the second Monday`)
	}
	return nil
}

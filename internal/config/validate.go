package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

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
)

var (
	// Nomad variable paths: ^[a-zA-Z0-9-_~/]{1,128}$, no dots.
	variablePathRE = regexp.MustCompile(`^[a-zA-Z0-9\-_~/]+$`)
)

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

// validator collects errors about c.
type validator struct {
	c    *Config
	errs Errors
	// nodeless: the groups' hosts_without_node so far, host -> the scope
	// that listed it first.
	nodeless map[string]scope
}

// errorf records an error about the value at key, positioned where the value
// was written (or at the block fallback when the value was not written, for
// a missing required attribute).
func (v *validator) errorf(key scope, format string, args ...any) {
	v.errs = append(v.errs, &Error{Range: v.c.pos[key.key], Msg: key.name + ": " + fmt.Sprintf(format, args...)})
}

// errorAt records an error positioned at the range of the value at rangeKey.
func (v *validator) errorAt(rangeKey string, name string, format string, args ...any) {
	v.errs = append(v.errs, &Error{Range: v.c.pos[rangeKey], Msg: name + ": " + fmt.Sprintf(format, args...)})
}

// good reports whether none of the keys failed to decode.
func (v *validator) good(keys ...scope) bool {
	for _, k := range keys {
		if v.c.bad[k.key] {
			return false
		}
	}
	return true
}

func (v *validator) positive(key scope, d time.Duration) {
	if d <= 0 && v.good(key) {
		v.errorf(key, "must be greater than 0, got %s", FormatDuration(d))
	}
}

func (v *validator) maxNotBelow(base, maxKey scope, b, m time.Duration) {
	if m < b && v.good(base, maxKey) {
		v.errorf(maxKey, "%s is less than %s (%s)", FormatDuration(m), base.name, FormatDuration(b))
	}
}

func (v *validator) argv(key scope, argv []string, what string) {
	if len(argv) > 0 && argv[0] == "" {
		v.errorf(key, "the program (first element) of %s must not be empty", what)
	}
}

func (v *validator) nomad() {
	n, s := &v.c.Nomad, scope{"nomad", "nomad"}
	addr := s.sub("address")
	if n.Address == "" {
		v.errorf(addr, "must not be empty")
	} else if u, err := url.Parse(n.Address); err != nil {
		v.errorf(addr, "invalid URL: %v", unwrapURLError(err))
	} else {
		switch {
		case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix":
			v.errorf(addr, "%q must start with http://, https:// or unix://", u.Redacted())
		case u.Scheme != "unix" && u.Host == "":
			v.errorf(addr, "%q has no host", u.Redacted())
		}
	}
	if !validNamespace(n.Namespace) {
		v.errorf(s.sub("namespace"), "invalid namespace %q: use 1 to 128 letters, digits and dashes", n.Namespace)
	}
	if (n.ClientCert == "") != (n.ClientKey == "") {
		if n.ClientCert == "" {
			v.errorf(s.sub("client_key"), "client_key is set but client_cert is not: set both or neither")
		} else {
			v.errorf(s.sub("client_cert"), "client_cert is set but client_key is not: set both or neither")
		}
	}
}

// unwrapURLError drops url.Error's repetition of the URL, which could hold
// credentials.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func (v *validator) state() {
	p, key := v.c.State.Prefix, scope{"state.prefix", "state.prefix"}
	switch {
	case p == "":
		v.errorf(key, "must not be empty")
	case !variablePathRE.MatchString(p):
		v.errorf(key, "invalid variable path %q: use only letters, digits and - _ ~ / (no dots)", p)
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/"):
		v.errorf(key, "%q must not start or end with a slash", p)
	case strings.Contains(p, "//"):
		v.errorf(key, "%q must not contain an empty path segment (//)", p)
	case p == "nomad" || strings.HasPrefix(p, "nomad/"):
		v.errorf(key, "%q is under nomad/, which Nomad reserves", p)
	case len(p) > MaxPrefixLength:
		v.errorf(key, "%q is longer than %d characters", p, MaxPrefixLength)
	}
}

func (v *validator) agent() {
	a, s := &v.c.Agent, scope{"agent", "agent"}
	if k := s.sub("host"); strings.ContainsAny(a.Host, "~/") && v.good(k) {
		v.errorf(k, `%q contains "~" or "/": not allowed in a host name (rollboot stores dots as "~" in variable paths)`, a.Host)
	}
	if a.BootIDFile == "" {
		v.errorf(s.sub("boot_id_file"), "must not be empty")
	} else if !strings.HasPrefix(a.BootIDFile, "/") {
		v.errorf(s.sub("boot_id_file"), "%q must be an absolute path", a.BootIDFile)
	}
	if a.MachineIDFile != "" && !strings.HasPrefix(a.MachineIDFile, "/") {
		v.errorf(s.sub("machine_id_file"), "%q must be an absolute path (or \"\" for no FleetLock id)", a.MachineIDFile)
	}
	if a.SentinelFile != "" && !strings.HasPrefix(a.SentinelFile, "/") {
		v.errorf(s.sub("sentinel_file"), "%q must be an absolute path (or \"\" to disable the file detector)", a.SentinelFile)
	}
	v.argv(s.sub("sentinel_command"), a.SentinelCommand, "sentinel_command")
	v.positive(s.sub("sentinel_command_interval"), a.SentinelCommandInterval)
	v.positive(s.sub("sentinel_command_timeout"), a.SentinelCommandTimeout)
	v.envNames(s.sub("pass_env"), a.PassEnv)
	if !strings.HasPrefix(a.ServerLockFile, "/") && v.good(s.sub("server_lock_file")) {
		v.errorf(s.sub("server_lock_file"), "%q must be an absolute path (the file must outlive a reboot)", a.ServerLockFile)
	}
	if ttl := s.sub("server_lock_ttl"); (a.ServerLockTTL < MinLockTTL || a.ServerLockTTL > MaxLockTTL) && v.good(ttl) {
		v.errorf(ttl, "must be between %s and %s (Nomad's range for lock TTLs), got %s", FormatDuration(MinLockTTL), FormatDuration(MaxLockTTL), FormatDuration(a.ServerLockTTL))
	}

	r, rs := &a.Reboot, scope{"agent.reboot", "agent.reboot"}
	switch r.Method {
	case RebootMethodCommand:
		if len(r.Command) == 0 && v.good(rs.sub("command")) {
			v.errorf(rs.sub("command"), `must not be empty when method = "command"`)
		}
	case RebootMethodLogind, RebootMethodSignal:
	default:
		v.errorf(rs.sub("method"), `unknown reboot method %q: use "command", "logind" or "signal"`, r.Method)
	}
	v.argv(rs.sub("command"), r.Command, "command")
	if (r.Signal < 1 || r.Signal > 64) && v.good(rs.sub("signal")) {
		v.errorf(rs.sub("signal"), "must be a signal number from 1 to 64, got %d", r.Signal)
	}
	if r.Delay < 0 && v.good(rs.sub("delay")) {
		v.errorf(rs.sub("delay"), "must not be negative, got %s", FormatDuration(r.Delay))
	}
	for _, h := range []struct {
		name  string
		hooks [][]string
	}{{"pre_hooks", r.PreHooks}, {"post_hooks", r.PostHooks}} {
		key := rs.sub(h.name)
		for i, argv := range h.hooks {
			elem := scope{fmt.Sprintf("%s.%d", key.key, i), fmt.Sprintf("%s[%d]", key.name, i)}
			if _, ok := v.c.pos[elem.key]; !ok {
				elem.key = key.key
			}
			if len(argv) == 0 {
				v.errorf(elem, "a hook must have at least the program to run")
				continue
			}
			v.argv(elem, argv, "a hook")
		}
	}
	v.positive(rs.sub("hook_timeout"), r.HookTimeout)
	v.positive(rs.sub("recheck_interval"), r.RecheckInterval)
}

func (v *validator) coordinator() {
	co, s := &v.c.Coordinator, scope{"coordinator", "coordinator"}
	if ttl := s.sub("lock_ttl"); (co.LockTTL < MinLockTTL || co.LockTTL > MaxLockTTL) && v.good(ttl) {
		v.errorf(ttl, "must be between %s and %s (Nomad's range for lock TTLs), got %s", FormatDuration(MinLockTTL), FormatDuration(MaxLockTTL), FormatDuration(co.LockTTL))
	}
	if k := s.sub("standbys"); (co.Standbys < 0 || co.Standbys > MaxStandbys) && v.good(k) {
		v.errorf(k, "must be between 0 and %d, got %d", MaxStandbys, co.Standbys)
	}
	v.positive(s.sub("resync_interval"), co.ResyncInterval)
	v.positive(s.sub("rejoin_timeout"), co.RejoinTimeout)
	if k := s.sub("leader_transfer_denied"); co.LeaderTransferDenied != "continue" && co.LeaderTransferDenied != "hold" && v.good(k) {
		v.errorf(k, "must be \"continue\" or \"hold\", got %q", co.LeaderTransferDenied)
	}
	if k := s.sub("server_stable_for"); co.ServerStableFor < 0 && v.good(k) {
		v.errorf(k, "must not be negative, got %s", FormatDuration(co.ServerStableFor))
	}
	v.positive(s.sub("reboot_loop_backoff"), co.RebootLoopBackoff)
	v.maxNotBelow(s.sub("reboot_loop_backoff"), s.sub("reboot_loop_max_backoff"), co.RebootLoopBackoff, co.RebootLoopMaxBackoff)
	if hs := s.sub("history_size"); co.HistorySize < 1 && v.good(hs) {
		v.errorf(hs, "must be at least 1, got %d", co.HistorySize)
	}
	if k := s.sub("agent_job"); strings.ContainsAny(co.AgentJob, " \x00") && v.good(k) {
		v.errorf(k, "invalid job ID %q: no spaces or null characters (\"\" turns the check off)", co.AgentJob)
	}
	if k := s.sub("agent_job_namespace"); co.AgentJobNamespace != "" && !validNamespace(co.AgentJobNamespace) && v.good(k) {
		v.errorf(k, "invalid namespace %q: use 1 to 128 letters, digits and dashes (\"\" means nomad.namespace)", co.AgentJobNamespace)
	}
}

func (v *validator) drain() {
	dr, s := &v.c.Drain, scope{"drain", "drain"}
	v.positive(s.sub("deadline"), dr.Deadline)
	switch dr.OnTimeout {
	case OnTimeoutAbort, OnTimeoutForce:
	default:
		v.errorf(s.sub("on_timeout"), `unknown value %q: use "abort" or "force"`, dr.OnTimeout)
	}
	v.positive(s.sub("retry_backoff"), dr.RetryBackoff)
	v.maxNotBelow(s.sub("retry_backoff"), s.sub("retry_max_backoff"), dr.RetryBackoff, dr.RetryMaxBackoff)
}

// Limits of fleetlock.max_body_bytes.
const (
	MinFleetLockBody = 256
	MaxFleetLockBody = 16 << 20
)

func (v *validator) fleetlock() {
	f, s := &v.c.FleetLock, scope{"fleetlock", "fleetlock"}
	v.listenAddr(s.sub("listen"), f.Listen, "7777")
	if p := f.PathPrefix; p != "" {
		switch {
		case !strings.HasPrefix(p, "/"):
			v.errorf(s.sub("path_prefix"), "%q must start with a slash, such as \"/fleet_lock\"", p)
		case strings.ContainsAny(p, "?#% "):
			v.errorf(s.sub("path_prefix"), "%q must be a plain URL path (no ?, #, %% or spaces)", p)
		case strings.TrimRight(p, "/") == "/metrics" || strings.HasPrefix(p, "/metrics/"):
			v.errorf(s.sub("path_prefix"), "%q collides with /metrics (served on the same listener with serve_metrics)", p)
		}
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		if f.TLSCert == "" {
			v.errorf(s.sub("tls_key"), "tls_key is set but tls_cert is not: set both or neither")
		} else {
			v.errorf(s.sub("tls_cert"), "tls_cert is set but tls_key is not: set both or neither")
		}
	}
	if f.ClientCA != "" && f.TLSCert == "" {
		v.errorf(s.sub("client_ca"), "client certificates need TLS: set tls_cert and tls_key too")
	}
	if mb := s.sub("max_body_bytes"); (f.MaxBodyBytes < MinFleetLockBody || f.MaxBodyBytes > MaxFleetLockBody) && v.good(mb) {
		v.errorf(mb, "must be between %d and %d, got %d", MinFleetLockBody, MaxFleetLockBody, f.MaxBodyBytes)
	}
	v.fleetlockAccess()
}

// listenAddr checks a listener's host:port (port is the example given).
func (v *validator) listenAddr(key scope, addr, port string) {
	if host, p, err := net.SplitHostPort(addr); err != nil {
		v.errorf(key, "invalid address %q: use host:port such as \"127.0.0.1:%s\" or \":%s\"", addr, port, port)
	} else if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
		v.errorf(key, "invalid port %q in %q: use a number from 0 to 65535", p, addr)
	} else if strings.ContainsAny(host, "/ ") {
		v.errorf(key, "invalid host %q in %q", host, addr)
	}
}

// telemetry validates the metrics listener: "" is off.
func (v *validator) telemetry() {
	if l := v.c.Telemetry.Listen; l != "" {
		v.listenAddr(scope{"telemetry.listen", "telemetry.listen"}, l, "9464")
	}
	hs := scope{"telemetry.allowed_hosts", "telemetry.allowed_hosts"}
	for k, h := range v.c.Telemetry.AllowedHosts {
		key := fmt.Sprintf("%s.%d", hs.key, k)
		if _, ok := v.c.pos[key]; !ok {
			key = hs.key
		}
		if len(h) > 253 || !hostNameRE.MatchString(h) {
			v.errorAt(key, hs.name, `%q is not a host name: list names such as "rollboot.service.consul", without a port or wildcard (IP addresses and localhost are always allowed)`, h)
		}
	}
}

// hostNameRE is a DNS name: labels of letters, digits, "-" and "_", dotted.
var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$`)

// MaxFleetLockRequestTimeout keeps fleetlock.request_timeout below the FleetLock
// server's write timeout (60s), so that a slow answer is still written.
const MaxFleetLockRequestTimeout = 50 * time.Second

// fleetlockAccess validates who may take FleetLock slots and how fast.
func (v *validator) fleetlockAccess() {
	f, s := &v.c.FleetLock, scope{"fleetlock", "fleetlock"}
	for _, id := range f.AllowedIDs {
		if len(id) > 64 || !fleetlockIDRE.MatchString(id) {
			v.errorf(s.sub("allowed_ids"), "%q is not a FleetLock id: use 1 to 64 letters, digits, dots, dashes and underscores", id)
		}
	}
	if k := s.sub("max_nodeless_slots"); f.MaxNodelessSlots < 1 && v.good(k) {
		v.errorf(k, "must be at least 1, got %d (an empty allowed_ids already admits no host without a node)", f.MaxNodelessSlots)
	}
	if k := s.sub("request_timeout"); (f.RequestTimeout < time.Second || f.RequestTimeout > MaxFleetLockRequestTimeout) && v.good(k) {
		v.errorf(k, "must be between 1s and %s (below the server's 60s write timeout), got %s", MaxFleetLockRequestTimeout, f.RequestTimeout)
	}
	if k := s.sub("rate_limit"); f.RateLimit < 0 && v.good(k) {
		v.errorf(k, "must be 0 (no limit) or more, got %d", f.RateLimit)
	}
	switch f.ClientCertID {
	case "san_or_cn", "san", "cn", "none":
	default:
		v.errorf(s.sub("client_cert_id"), "%q: use \"san_or_cn\", \"san\", \"cn\" or \"none\"", f.ClientCertID)
	}
	if k := s.sub("record_grace"); f.RecordGrace <= 0 && v.good(k) {
		v.errorf(k, "must be positive, got %s", f.RecordGrace)
	}
}

// fleetlockIDRE is the pattern of a FleetLock id (as the server accepts it).
var fleetlockIDRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// windows checks the windows and compiles them. It returns every window
// defined, by name (the first of a name, compiled as far as it is valid), and
// all of them in file order: the default schedule.
func (v *validator) windows() (map[string]policy.Window, policy.Schedule) {
	byName := map[string]policy.Window{}
	first := map[string]int{}
	var all policy.Schedule
	for i, wc := range v.c.Windows {
		s := windowScope(i, wc.Name)
		name := scope{s.key + ".name", s.name}
		j, dup := first[wc.Name]
		switch {
		case wc.Name == "":
			v.errorf(name, "a window needs a name")
		case dup:
			v.errorf(name, "duplicate window name, first defined at %s", v.posString(windowScope(j, wc.Name).key))
		}
		w := v.window(s, wc)
		if wc.Name != "" && !dup {
			first[wc.Name] = i
			byName[wc.Name] = w
		}
		all = append(all, w)
	}
	return byName, all
}

// window checks one window block and compiles it.
func (v *validator) window(s scope, wc WindowConfig) policy.Window {
	w := policy.Window{Name: wc.Name}
	days := s.sub("days")
	if len(wc.Days) == 0 && v.good(days) {
		v.errorf(days, "must list at least one day")
	}
	for k, d := range wc.Days {
		day, err := policy.ParseWeekday(d)
		if err != nil {
			key := fmt.Sprintf("%s.%d", days.key, k)
			if _, ok := v.c.pos[key]; !ok {
				key = days.key
			}
			v.errorAt(key, days.name, "%v", err)
			continue
		}
		w.Days = append(w.Days, day)
	}
	start, startOK := v.clock(s, "start", wc.Start)
	end, endOK := v.clock(s, "end", wc.End)
	if startOK && start == 24*time.Hour {
		v.errorf(s.sub("start"), `"24:00" can only be an end; a window starting at midnight starts at "00:00"`)
	} else if startOK && endOK && start == end {
		v.errorf(s.sub("end"), `start and end are both %s, so the window would be empty; for a whole day use start = "00:00" and end = "24:00"`, wc.Start)
	}
	w.Start, w.End = start, end
	loc, err := policy.ParseTimeZone(wc.TimeZone)
	if err != nil {
		v.errorf(s.sub("time_zone"), "%v", err)
	}
	w.Location = loc
	return w
}

// clock parses a window's start or end, reporting a missing or bad value.
func (v *validator) clock(s scope, attr, val string) (time.Duration, bool) {
	key := s.sub(attr)
	if !v.good(key) {
		return 0, false
	}
	if val == "" {
		if _, ok := v.c.pos[key.key]; !ok {
			key.key = s.key // point at the block
			v.errorf(key, `is required, for example %s = "22:00"`, attr)
			return 0, false
		}
		v.errorf(key, `must not be empty, use HH:MM such as "22:00"`)
		return 0, false
	}
	d, err := policy.ParseClock(val)
	if err != nil {
		v.errorf(key, "%v", err)
		return 0, false
	}
	return d, true
}

func (v *validator) posString(key string) string {
	r, ok := v.c.pos[key]
	if !ok || r.Filename == "" {
		return "an earlier block"
	}
	return rangeString(r)
}

// groups checks the groups and compiles them, in file order (their match
// order). windows are the windows defined, by name; all is the default
// schedule.
func (v *validator) groups(windows map[string]policy.Window, all policy.Schedule) []policy.Group {
	first := map[string]int{}
	catchAll := -1
	groups := make([]policy.Group, 0, len(v.c.Groups))
	for i, gc := range v.c.Groups {
		s := groupScope(i, gc.Name)
		name := scope{s.key + ".name", s.name}
		switch j, dup := first[gc.Name]; {
		case gc.Name == "":
			v.errorf(name, "a group needs a name")
		case gc.Name == policy.DefaultGroupName:
			v.errorf(name, `the name "default" is reserved for the nodes no group matches; to configure them, add a last group with another name and no filter`)
		case dup:
			v.errorf(name, "duplicate group name, first defined at %s", v.posString(groupScope(j, gc.Name).key))
		default:
			first[gc.Name] = i
		}
		if catchAll >= 0 {
			v.errorf(name, "can never match a node: group %q before it has no filter and matches every node", v.c.Groups[catchAll].Name)
		}
		if gc.Filter == "" && catchAll < 0 && v.good(s.sub("filter")) {
			catchAll = i
		}
		groups = append(groups, v.group(s, gc, windows, all))
	}
	return groups
}

// group checks the settings of one group block and compiles it.
func (v *validator) group(s scope, gc GroupConfig, windows map[string]policy.Window, all policy.Schedule) policy.Group {
	g := policy.Group{Name: gc.Name, Concurrency: gc.Concurrency, Schedule: all, Settle: gc.Settle,
		HostsWithoutNode: v.hostsWithoutNode(s, gc.HostsWithoutNode)}
	if gc.Settle < 0 && v.good(s.sub("settle")) {
		v.errorf(s.sub("settle"), "must not be negative, got %s", FormatDuration(gc.Settle))
	}
	if gc.Filter != "" {
		f, err := policy.CompileFilter(gc.Filter)
		if err != nil {
			v.errorf(s.sub("filter"), "%v", err)
		}
		g.Filter = f
	}
	if gc.Concurrency < 1 && v.good(s.sub("concurrency")) {
		v.errorf(s.sub("concurrency"), "must be at least 1, got %d", gc.Concurrency)
	}
	pct, err := policy.ParsePercent(gc.MaxUnavailable)
	if err != nil {
		v.errorf(s.sub("max_unavailable"), "%v", err)
	}
	g.MaxUnavailablePct = pct
	if len(gc.Windows) > 0 {
		g.Schedule = nil
	}
	ws := s.sub("windows")
	for k, name := range gc.Windows {
		if w, ok := windows[name]; ok {
			g.Schedule = append(g.Schedule, w)
			continue
		}
		key := fmt.Sprintf("%s.%d", ws.key, k)
		if _, ok := v.c.pos[key]; !ok {
			key = ws.key
		}
		if len(windows) == 0 {
			v.errorAt(key, ws.name, "unknown window %q: no window block is defined", name)
		} else {
			v.errorAt(key, ws.name, "unknown window %q: defined windows are %s", name, knownNames(windows))
		}
	}
	return g
}

func knownNames(m map[string]policy.Window) string {
	var names []string
	for n := range m {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// hostsWithoutNode checks a group's hosts_without_node: host names rollboot
// can store, each listed once across every group.
func (v *validator) hostsWithoutNode(s scope, hosts []string) []string {
	if v.nodeless == nil {
		v.nodeless = map[string]scope{}
	}
	hs := s.sub("hosts_without_node")
	for k, h := range hosts {
		key := fmt.Sprintf("%s.%d", hs.key, k)
		if _, ok := v.c.pos[key]; !ok {
			key = hs.key
		}
		switch first, dup := v.nodeless[h]; {
		case h == "" || strings.ContainsAny(h, "~/"):
			v.errorAt(key, hs.name, `%q is not a host name rollboot can store (empty, or contains "~" or "/")`, h)
		case dup:
			v.errorAt(key, hs.name, "host %q is already listed in %s: a host belongs to one group", h, first.name)
		default:
			v.nodeless[h] = hs
		}
	}
	return slices.Clone(hosts)
}

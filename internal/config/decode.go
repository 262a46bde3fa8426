package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
)

// Load reads the HCL file at path (HCL JSON if the name ends in ".json")
// over the defaults and compiles it, without the environment: every problem
// is returned at once as Errors, and then no Compiled.
//
// A daemon takes the environment and its flags into account: it calls Parse,
// then ApplyEnv, then applies its flags, then Compile.
func Load(path string) (*Compiled, error) {
	c, err := Parse(path)
	if err != nil {
		return nil, err
	}
	return Compile(c)
}

// LoadBytes is Load for a file already read; filename is used in positions
// and to choose between HCL and HCL JSON.
func LoadBytes(src []byte, filename string) (*Compiled, error) {
	c, err := ParseBytes(src, filename)
	if err != nil {
		return nil, err
	}
	return Compile(c)
}

// Parse reads the HCL file at path (HCL JSON if the name ends in ".json")
// over the defaults, without checking it. It fails only when the file cannot
// be read or is not HCL; a value that cannot be decoded (a list where a
// string belongs, a malformed duration) is kept aside and reported by
// Compile with the other problems, so that every problem is reported at once.
func Parse(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseBytes(src, path)
}

// ParseBytes is Parse for a file already read; filename is used in positions
// and to choose between HCL and HCL JSON.
//
// A local file holds only host-local settings: a policy setting in it (a
// group, window or drain block, or a rollout rule of the coordinator block) is
// reported, where it is written, as belonging in the stored policy.
func ParseBytes(src []byte, filename string) (*Config, error) {
	file, err := parseHCL(src, filename)
	if err != nil {
		return nil, err
	}
	return decodeFile(file, localFile), nil
}

// decodeFile decodes a parsed file of the given kind over the defaults.
func decodeFile(file *hcl.File, kind fileKind) *Config {
	c := Default()
	c.bad = map[string]bool{}
	d := &decoder{c: c, kind: kind}
	d.root(file.Body)
	c.problems = d.errs
	return c
}

// parseHCL parses src as HCL (HCL JSON if filename ends in ".json").
func parseHCL(src []byte, filename string) (*hcl.File, error) {
	parser := hclparse.NewParser()
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if strings.HasSuffix(filename, ".json") {
		file, diags = parser.ParseJSON(src, filename)
	} else {
		file, diags = parser.ParseHCL(src, filename)
	}
	if diags.HasErrors() {
		return nil, fromDiags(diags).orNil()
	}
	return file, nil
}

// decoder decodes the body of a file into c, recording positions and
// collecting errors.
type decoder struct {
	c    *Config
	kind fileKind
	errs Errors
}

// scope names a block: key for positions, name for messages.
type scope struct{ key, name string }

func (s scope) sub(attr string) scope { return scope{s.key + "." + attr, s.name + "." + attr} }

func (d *decoder) errorf(rng hcl.Range, format string, args ...any) {
	d.errs = append(d.errs, &Error{Range: rng, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	content, diags := body.Content(schema)
	d.errs = append(d.errs, fromDiags(diags)...)
	return content
}

func attrSchema(names ...string) []hcl.AttributeSchema {
	out := make([]hcl.AttributeSchema, len(names))
	for i, n := range names {
		out[i] = hcl.AttributeSchema{Name: n}
	}
	return out
}

// single returns the only block of type typ, reporting any further ones.
func (d *decoder) single(blocks hcl.Blocks, typ string) *hcl.Block {
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		if first != nil {
			d.errorf(b.DefRange, "duplicate %s block: only one is allowed, the first is at %s", typ, rangeString(first.DefRange))
			continue
		}
		first = b
	}
	return first
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

func (d *decoder) root(body hcl.Body) {
	content := d.content(body, &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "nomad"}, {Type: "state"}, {Type: "agent"}, {Type: "coordinator"}, {Type: "drain"}, {Type: "fleetlock"}, {Type: "telemetry"}, {Type: "notify"}, {Type: "alerts"}, {Type: "workloads"}, {Type: "capacity"}, {Type: "healthy"},
			{Type: "group", LabelNames: []string{"name"}},
			{Type: "window", LabelNames: []string{"name"}},
		},
	})
	if content == nil {
		return
	}
	// A block that belongs in the other kind of file is reported, not decoded.
	var blocks hcl.Blocks
	for _, b := range content.Blocks {
		if d.checkBlock(b) {
			blocks = append(blocks, b)
		}
	}
	if b := d.single(blocks, "nomad"); b != nil {
		d.nomad(b.Body)
	}
	if b := d.single(blocks, "state"); b != nil {
		d.state(b.Body)
	}
	if b := d.single(blocks, "agent"); b != nil {
		d.agent(b.Body)
	}
	if b := d.single(blocks, "coordinator"); b != nil {
		d.coordinator(b.Body)
	}
	if b := d.single(blocks, "drain"); b != nil {
		d.drain(b.Body)
	}
	if b := d.single(blocks, "fleetlock"); b != nil {
		d.fleetlock(b.Body)
	}
	if b := d.single(blocks, "telemetry"); b != nil {
		d.telemetry(b.Body)
	}
	if b := d.single(blocks, "notify"); b != nil {
		d.notify(b.Body)
	}
	if b := d.single(blocks, "alerts"); b != nil {
		d.alerts(b.Body)
	}
	if b := d.single(blocks, "workloads"); b != nil {
		d.workloads(b.Body)
	}
	if b := d.single(blocks, "capacity"); b != nil {
		d.capacity(b.Body)
	}
	if b := d.single(blocks, "healthy"); b != nil { // before the groups: their default
		d.healthy(b.Body, scope{"healthy", "healthy"}, &d.c.Healthy)
	}
	for _, b := range blocks {
		switch b.Type {
		case "group":
			d.group(b)
		case "window":
			d.window(b)
		}
	}
}

func (d *decoder) nomad(body hcl.Body) {
	s := scope{"nomad", "nomad"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"address", "token", "region", "namespace", "ca_cert", "client_cert", "client_key", "tls_server_name", "tls_skip_verify")})
	if content == nil {
		return
	}
	a, n := content.Attributes, &d.c.Nomad
	d.str(a, s, "address", &n.Address)
	var tok string
	if d.str(a, s, "token", &tok) {
		n.Token = Secret(tok)
	}
	d.str(a, s, "region", &n.Region)
	d.str(a, s, "namespace", &n.Namespace)
	d.str(a, s, "ca_cert", &n.CACert)
	d.str(a, s, "client_cert", &n.ClientCert)
	d.str(a, s, "client_key", &n.ClientKey)
	d.str(a, s, "tls_server_name", &n.TLSServerName)
	d.boolean(a, s, "tls_skip_verify", &n.TLSSkipVerify)
}

func (d *decoder) state(body hcl.Body) {
	s := scope{"state", "state"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema("prefix")})
	if content == nil {
		return
	}
	d.str(content.Attributes, s, "prefix", &d.c.State.Prefix)
}

func (d *decoder) agent(body hcl.Body) {
	s := scope{"agent", "agent"}
	content := d.content(body, &hcl.BodySchema{
		Attributes: attrSchema("host", "boot_id_file", "machine_id_file", "publish_fleetlock_id", "sentinel_file", "sentinel_command",
			"sentinel_command_interval", "sentinel_command_timeout", "pass_env", "server_lock_file", "server_lock_ttl"),
		Blocks: []hcl.BlockHeaderSchema{{Type: "reboot"}},
	})
	if content == nil {
		return
	}
	a, ag := content.Attributes, &d.c.Agent
	d.str(a, s, "host", &ag.Host)
	d.str(a, s, "boot_id_file", &ag.BootIDFile)
	d.str(a, s, "machine_id_file", &ag.MachineIDFile)
	d.boolean(a, s, "publish_fleetlock_id", &ag.PublishFleetLockID)
	d.str(a, s, "sentinel_file", &ag.SentinelFile)
	d.strList(a, s, "sentinel_command", &ag.SentinelCommand)
	d.duration(a, s, "sentinel_command_interval", &ag.SentinelCommandInterval)
	d.duration(a, s, "sentinel_command_timeout", &ag.SentinelCommandTimeout)
	d.strList(a, s, "pass_env", &ag.PassEnv)
	d.str(a, s, "server_lock_file", &ag.ServerLockFile)
	d.duration(a, s, "server_lock_ttl", &ag.ServerLockTTL)
	if b := d.single(content.Blocks, "reboot"); b != nil {
		d.reboot(b.Body)
	}
}

func (d *decoder) reboot(body hcl.Body) {
	s := scope{"agent.reboot", "agent.reboot"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"method", "command", "signal", "delay", "pre_hooks", "post_hooks", "hook_timeout",
		"recheck_interval")})
	if content == nil {
		return
	}
	a, r := content.Attributes, &d.c.Agent.Reboot
	d.str(a, s, "method", &r.Method)
	d.strList(a, s, "command", &r.Command)
	d.integer(a, s, "signal", &r.Signal)
	d.duration(a, s, "delay", &r.Delay)
	d.argvList(a, s, "pre_hooks", &r.PreHooks)
	d.argvList(a, s, "post_hooks", &r.PostHooks)
	d.duration(a, s, "hook_timeout", &r.HookTimeout)
	d.duration(a, s, "recheck_interval", &r.RecheckInterval)
}

func (d *decoder) coordinator(body hcl.Body) {
	s := scope{"coordinator", "coordinator"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"enabled", "lock_ttl", "standbys", "resync_interval", "rejoin_timeout", "reboot_loop_backoff",
		"reboot_loop_max_backoff", "history_size", "server_stable_for", "leader_transfer_denied",
		"agent_job", "agent_job_namespace", "node_meta")})
	if content == nil {
		return
	}
	a, co := content.Attributes, &d.c.Coordinator
	for name, at := range a {
		if !d.checkAttr(at, "coordinator."+name, policyCoordinatorAttr[name]) {
			delete(a, name) // reported, not decoded
		}
	}
	d.boolean(a, s, "enabled", &co.Enabled)
	d.duration(a, s, "lock_ttl", &co.LockTTL)
	d.integer(a, s, "standbys", &co.Standbys)
	d.duration(a, s, "resync_interval", &co.ResyncInterval)
	d.duration(a, s, "rejoin_timeout", &co.RejoinTimeout)
	d.duration(a, s, "server_stable_for", &co.ServerStableFor)
	d.str(a, s, "leader_transfer_denied", &co.LeaderTransferDenied)
	d.duration(a, s, "reboot_loop_backoff", &co.RebootLoopBackoff)
	d.duration(a, s, "reboot_loop_max_backoff", &co.RebootLoopMaxBackoff)
	d.integer(a, s, "history_size", &co.HistorySize)
	d.str(a, s, "agent_job", &co.AgentJob)
	d.str(a, s, "agent_job_namespace", &co.AgentJobNamespace)
	d.boolean(a, s, "node_meta", &co.NodeMeta)
}

func (d *decoder) drain(body hcl.Body) {
	s := scope{"drain", "drain"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"deadline", "on_timeout", "retry_backoff", "retry_max_backoff", "ignore_system_jobs", "stop_jobs")})
	if content == nil {
		return
	}
	a, dr := content.Attributes, &d.c.Drain
	d.duration(a, s, "deadline", &dr.Deadline)
	d.str(a, s, "on_timeout", &dr.OnTimeout)
	d.duration(a, s, "retry_backoff", &dr.RetryBackoff)
	d.duration(a, s, "retry_max_backoff", &dr.RetryMaxBackoff)
	d.boolean(a, s, "ignore_system_jobs", &dr.IgnoreSystemJobs)
	d.strList(a, s, "stop_jobs", &dr.StopJobs)
}

func (d *decoder) fleetlock(body hcl.Body) {
	s := scope{"fleetlock", "fleetlock"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"enabled", "listen", "path_prefix", "tls_cert", "tls_key", "client_ca", "max_body_bytes",
		"allowed_ids", "max_nodeless_slots", "request_timeout", "rate_limit", "client_cert_id", "record_grace", "serve_metrics")})
	if content == nil {
		return
	}
	a, f := content.Attributes, &d.c.FleetLock
	d.boolean(a, s, "enabled", &f.Enabled)
	d.str(a, s, "listen", &f.Listen)
	d.str(a, s, "path_prefix", &f.PathPrefix)
	d.str(a, s, "tls_cert", &f.TLSCert)
	d.str(a, s, "tls_key", &f.TLSKey)
	d.str(a, s, "client_ca", &f.ClientCA)
	d.integer(a, s, "max_body_bytes", &f.MaxBodyBytes)
	d.strList(a, s, "allowed_ids", &f.AllowedIDs)
	d.integer(a, s, "max_nodeless_slots", &f.MaxNodelessSlots)
	d.duration(a, s, "request_timeout", &f.RequestTimeout)
	d.integer(a, s, "rate_limit", &f.RateLimit)
	d.str(a, s, "client_cert_id", &f.ClientCertID)
	d.duration(a, s, "record_grace", &f.RecordGrace)
	d.boolean(a, s, "serve_metrics", &f.ServeMetrics)
}

func (d *decoder) telemetry(body hcl.Body) {
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema("listen", "allowed_hosts")})
	if content == nil {
		return
	}
	d.str(content.Attributes, scope{"telemetry", "telemetry"}, "listen", &d.c.Telemetry.Listen)
	d.strList(content.Attributes, scope{"telemetry", "telemetry"}, "allowed_hosts", &d.c.Telemetry.AllowedHosts)
}

func (d *decoder) group(b *hcl.Block) {
	i := len(d.c.Groups)
	g := GroupConfig{Name: b.Labels[0], Concurrency: 1}
	g.Drain, g.Healthy = d.c.groupDefaults()
	s := groupScope(i, g.Name)
	d.c.setPos(s.key, b.DefRange)
	d.c.setPos(s.key+".name", b.LabelRanges[0])
	content := d.content(b.Body, &hcl.BodySchema{Attributes: attrSchema(
		"filter", "concurrency", "max_unavailable", "windows", "settle", "hosts_without_node"),
		Blocks: groupBlockSchema})
	if content != nil {
		d.groupBlocks(content.Blocks, s, &g)
		a := content.Attributes
		d.str(a, s, "filter", &g.Filter)
		d.integer(a, s, "concurrency", &g.Concurrency)
		d.str(a, s, "max_unavailable", &g.MaxUnavailable)
		d.strList(a, s, "windows", &g.Windows)
		d.duration(a, s, "settle", &g.Settle)
		d.strList(a, s, "hosts_without_node", &g.HostsWithoutNode)
	}
	d.c.Groups = append(d.c.Groups, g)
}

func (d *decoder) window(b *hcl.Block) {
	i := len(d.c.Windows)
	w := WindowConfig{Name: b.Labels[0], Days: slices.Clone(allDayNames), TimeZone: "UTC"}
	s := windowScope(i, w.Name)
	d.c.setPos(s.key, b.DefRange)
	d.c.setPos(s.key+".name", b.LabelRanges[0])
	content := d.content(b.Body, &hcl.BodySchema{Attributes: attrSchema(
		"days", "start", "end", "time_zone")})
	if content != nil {
		a := content.Attributes
		d.strList(a, s, "days", &w.Days)
		d.str(a, s, "start", &w.Start)
		d.str(a, s, "end", &w.End)
		d.str(a, s, "time_zone", &w.TimeZone)
	}
	d.c.Windows = append(d.c.Windows, w)
}

func groupScope(i int, name string) scope {
	return scope{fmt.Sprintf("group.%d", i), fmt.Sprintf("group %q", name)}
}

func windowScope(i int, name string) scope {
	return scope{fmt.Sprintf("window.%d", i), fmt.Sprintf("window %q", name)}
}

var allDayNames = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

// value evaluates the attribute, with no variables or functions, and
// converts it to ty. It reports problems without ever quoting the value, so
// that secrets stay out of messages.
func (d *decoder) value(a hcl.Attributes, s scope, attr string, ty cty.Type, want string) (cty.Value, *hcl.Attribute, bool) {
	at, ok := a[attr]
	if !ok {
		return cty.NilVal, nil, false
	}
	key := s.sub(attr)
	rng := at.Expr.Range()
	v, diags := at.Expr.Value(nil)
	if diags.HasErrors() {
		d.errs = append(d.errs, fromDiags(diags)...)
		d.c.bad[key.key] = true
		return cty.NilVal, nil, false
	}
	if v.IsNull() {
		d.errorf(rng, "%s: must be %s, not null", key.name, want)
		d.c.bad[key.key] = true
		return cty.NilVal, nil, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil || !cv.IsWhollyKnown() {
		d.errorf(rng, "%s: must be %s", key.name, want)
		d.c.bad[key.key] = true
		return cty.NilVal, nil, false
	}
	// A list given with nulls inside.
	if !cv.IsNull() && ty.IsListType() {
		for it := cv.ElementIterator(); it.Next(); {
			if _, ev := it.Element(); ev.IsNull() || (ev.Type().IsListType() && hasNull(ev)) {
				d.errorf(rng, "%s: must be %s, with no null element", key.name, want)
				d.c.bad[key.key] = true
				return cty.NilVal, nil, false
			}
		}
	}
	d.c.setPos(key.key, rng)
	return cv, at, true
}

func hasNull(v cty.Value) bool {
	for it := v.ElementIterator(); it.Next(); {
		if _, ev := it.Element(); ev.IsNull() {
			return true
		}
	}
	return false
}

func (d *decoder) str(a hcl.Attributes, s scope, attr string, dst *string) bool {
	v, _, ok := d.value(a, s, attr, cty.String, "a string")
	if ok {
		*dst = v.AsString()
	}
	return ok
}

func (d *decoder) boolean(a hcl.Attributes, s scope, attr string, dst *bool) {
	v, _, ok := d.value(a, s, attr, cty.Bool, "true or false")
	if ok {
		*dst = v.True()
	}
}

func (d *decoder) integer(a hcl.Attributes, s scope, attr string, dst *int) {
	v, at, ok := d.value(a, s, attr, cty.Number, "a whole number")
	if !ok {
		return
	}
	var n int
	if err := gocty.FromCtyValue(v, &n); err != nil {
		key := s.sub(attr)
		d.errorf(at.Expr.Range(), "%s: must be a whole number, got %s", key.name, v.AsBigFloat().Text('g', -1))
		d.c.bad[key.key] = true
		return
	}
	*dst = n
}

func (d *decoder) duration(a hcl.Attributes, s scope, attr string, dst *time.Duration) {
	v, at, ok := d.value(a, s, attr, cty.String, `a duration string such as "30s", "5m" or "1h30m"`)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(v.AsString())
	if err != nil {
		key := s.sub(attr)
		d.errorf(at.Expr.Range(), `%s: invalid duration %q: use a number with a unit (ns, us, ms, s, m, h) such as "30s", "5m" or "1h30m"`, key.name, v.AsString())
		d.c.bad[key.key] = true
		return
	}
	*dst = dur
}

func (d *decoder) strList(a hcl.Attributes, s scope, attr string, dst *[]string) {
	v, at, ok := d.value(a, s, attr, cty.List(cty.String), "a list of strings")
	if !ok {
		return
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		out = append(out, ev.AsString())
	}
	*dst = out
	// Keep the position of each element, to point at a bad one.
	if elems, diags := hcl.ExprList(at.Expr); !diags.HasErrors() && len(elems) == len(out) {
		for i, e := range elems {
			d.c.setPos(fmt.Sprintf("%s.%d", s.sub(attr).key, i), e.Range())
		}
	}
}

func (d *decoder) argvList(a hcl.Attributes, s scope, attr string, dst *[][]string) {
	v, at, ok := d.value(a, s, attr, cty.List(cty.List(cty.String)), `a list of argv lists such as [["/usr/local/bin/notify", "rebooting"]]`)
	if !ok {
		return
	}
	var out [][]string
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		argv := []string{}
		for it2 := ev.ElementIterator(); it2.Next(); {
			_, sv := it2.Element()
			argv = append(argv, sv.AsString())
		}
		out = append(out, argv)
	}
	*dst = out
	if elems, diags := hcl.ExprList(at.Expr); !diags.HasErrors() && len(elems) == len(out) {
		for i, e := range elems {
			d.c.setPos(fmt.Sprintf("%s.%d", s.sub(attr).key, i), e.Range())
		}
	}
}

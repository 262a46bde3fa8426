package config

import (
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// Redacted is what a set Secret prints as.
const Redacted = "<redacted>"

// Secret is a string that never prints: fmt, slog and encoding/json all see
// Redacted (or "" when it is empty). Use Reveal to get the value.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns Redacted, or "" if the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString masks the secret in %#v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue masks the secret in slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON masks the secret in JSON.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText masks the secret in encodings that use TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String renders the local configuration in HCL, the token masked. It shows
// every local setting, defaults included, and none of the policy's (Rules.String).
func (c *Config) String() string {
	return render(c.writeNomad, c.writeState, c.writeAgent, c.writeCoordinator, c.writeFleetLock, c.writeTelemetry, c.writeNotify)
}

// policyString renders the policy settings in HCL, defaults included.
func (c *Config) policyString() string {
	blocks := []func(*hclwrite.Body){c.writeRollout, c.writeDrain, c.writeAlerts, c.writeWorkloads, c.writeCapacity, func(root *hclwrite.Body) { writeHealthy(root, c.Healthy) }}
	for _, g := range c.Groups {
		blocks = append(blocks, func(root *hclwrite.Body) {
			b := root.AppendNewBlock("group", []string{g.Name}).Body()
			b.SetAttributeValue("filter", cty.StringVal(g.Filter))
			b.SetAttributeValue("concurrency", cty.NumberIntVal(int64(g.Concurrency)))
			b.SetAttributeValue("max_unavailable", cty.StringVal(g.MaxUnavailable))
			b.SetAttributeValue("windows", strList(g.Windows))
			b.SetAttributeValue("settle", durationVal(g.Settle))
			b.SetAttributeValue("hosts_without_node", strList(g.HostsWithoutNode))
			writeGroupDrain(b, g.Drain)
			writeHealthy(b, g.Healthy)
		})
	}
	for _, w := range c.Windows {
		blocks = append(blocks, func(root *hclwrite.Body) {
			b := root.AppendNewBlock("window", []string{w.Name}).Body()
			b.SetAttributeValue("days", strList(w.Days))
			b.SetAttributeValue("start", cty.StringVal(w.Start))
			b.SetAttributeValue("end", cty.StringVal(w.End))
			b.SetAttributeValue("time_zone", cty.StringVal(w.TimeZone))
		})
	}
	return render(blocks...)
}

// render writes the blocks, a blank line between each.
func render(blocks ...func(*hclwrite.Body)) string {
	f := hclwrite.NewEmptyFile()
	root := f.Body()
	for i, write := range blocks {
		if i > 0 {
			root.AppendNewline()
		}
		write(root)
	}
	return string(f.Bytes())
}

func (c *Config) writeNomad(root *hclwrite.Body) {
	n := root.AppendNewBlock("nomad", nil).Body()
	n.SetAttributeValue("address", cty.StringVal(c.Nomad.Address))
	n.SetAttributeValue("token", cty.StringVal(c.Nomad.Token.String()))
	n.SetAttributeValue("region", cty.StringVal(c.Nomad.Region))
	n.SetAttributeValue("namespace", cty.StringVal(c.Nomad.Namespace))
	n.SetAttributeValue("ca_cert", cty.StringVal(c.Nomad.CACert))
	n.SetAttributeValue("client_cert", cty.StringVal(c.Nomad.ClientCert))
	n.SetAttributeValue("client_key", cty.StringVal(c.Nomad.ClientKey))
	n.SetAttributeValue("tls_server_name", cty.StringVal(c.Nomad.TLSServerName))
	n.SetAttributeValue("tls_skip_verify", cty.BoolVal(c.Nomad.TLSSkipVerify))
}

func (c *Config) writeState(root *hclwrite.Body) {
	root.AppendNewBlock("state", nil).Body().SetAttributeValue("prefix", cty.StringVal(c.State.Prefix))
}

func (c *Config) writeAgent(root *hclwrite.Body) {
	a := root.AppendNewBlock("agent", nil).Body()
	a.SetAttributeValue("host", cty.StringVal(c.Agent.Host))
	a.SetAttributeValue("boot_id_file", cty.StringVal(c.Agent.BootIDFile))
	a.SetAttributeValue("machine_id_file", cty.StringVal(c.Agent.MachineIDFile))
	a.SetAttributeValue("publish_fleetlock_id", cty.BoolVal(c.Agent.PublishFleetLockID))
	a.SetAttributeValue("sentinel_file", cty.StringVal(c.Agent.SentinelFile))
	a.SetAttributeValue("sentinel_command", strList(c.Agent.SentinelCommand))
	a.SetAttributeValue("sentinel_command_interval", durationVal(c.Agent.SentinelCommandInterval))
	a.SetAttributeValue("sentinel_command_timeout", durationVal(c.Agent.SentinelCommandTimeout))
	a.SetAttributeValue("pass_env", strList(c.Agent.PassEnv))
	a.SetAttributeValue("server_lock_file", cty.StringVal(c.Agent.ServerLockFile))
	a.SetAttributeValue("server_lock_ttl", durationVal(c.Agent.ServerLockTTL))
	r := a.AppendNewBlock("reboot", nil).Body()
	rc := c.Agent.Reboot
	r.SetAttributeValue("method", cty.StringVal(rc.Method))
	r.SetAttributeValue("command", strList(rc.Command))
	r.SetAttributeValue("signal", cty.NumberIntVal(int64(rc.Signal)))
	r.SetAttributeValue("delay", durationVal(rc.Delay))
	r.SetAttributeValue("pre_hooks", argvList(rc.PreHooks))
	r.SetAttributeValue("post_hooks", argvList(rc.PostHooks))
	r.SetAttributeValue("hook_timeout", durationVal(rc.HookTimeout))
	r.SetAttributeValue("recheck_interval", durationVal(rc.RecheckInterval))
}

func (c *Config) writeCoordinator(root *hclwrite.Body) {
	co := root.AppendNewBlock("coordinator", nil).Body()
	cc := c.Coordinator
	co.SetAttributeValue("enabled", cty.BoolVal(cc.Enabled))
	co.SetAttributeValue("lock_ttl", durationVal(cc.LockTTL))
	co.SetAttributeValue("standbys", cty.NumberIntVal(int64(cc.Standbys)))
	co.SetAttributeValue("resync_interval", durationVal(cc.ResyncInterval))
	co.SetAttributeValue("agent_job", cty.StringVal(cc.AgentJob))
	co.SetAttributeValue("agent_job_namespace", cty.StringVal(cc.AgentJobNamespace))
	co.SetAttributeValue("node_meta", cty.BoolVal(cc.NodeMeta))
}

// writeRollout writes the coordinator block of the policy: the rollout rules.
func (c *Config) writeRollout(root *hclwrite.Body) {
	co := root.AppendNewBlock("coordinator", nil).Body()
	cc := c.Coordinator
	co.SetAttributeValue("rejoin_timeout", durationVal(cc.RejoinTimeout))
	co.SetAttributeValue("server_stable_for", durationVal(cc.ServerStableFor))
	co.SetAttributeValue("leader_transfer_denied", cty.StringVal(cc.LeaderTransferDenied))
	co.SetAttributeValue("reboot_loop_backoff", durationVal(cc.RebootLoopBackoff))
	co.SetAttributeValue("reboot_loop_max_backoff", durationVal(cc.RebootLoopMaxBackoff))
	co.SetAttributeValue("history_size", cty.NumberIntVal(int64(cc.HistorySize)))
}

func (c *Config) writeDrain(root *hclwrite.Body) {
	d := root.AppendNewBlock("drain", nil).Body()
	d.SetAttributeValue("deadline", durationVal(c.Drain.Deadline))
	d.SetAttributeValue("on_timeout", cty.StringVal(c.Drain.OnTimeout))
	d.SetAttributeValue("retry_backoff", durationVal(c.Drain.RetryBackoff))
	d.SetAttributeValue("retry_max_backoff", durationVal(c.Drain.RetryMaxBackoff))
	d.SetAttributeValue("ignore_system_jobs", cty.BoolVal(c.Drain.IgnoreSystemJobs))
	d.SetAttributeValue("stop_jobs", strList(c.Drain.StopJobs))
}

// writeGroupDrain writes a group's drain block, its values in force.
func writeGroupDrain(parent *hclwrite.Body, g GroupDrainConfig) {
	d := parent.AppendNewBlock("drain", nil).Body()
	d.SetAttributeValue("deadline", durationVal(g.Deadline))
	d.SetAttributeValue("ignore_system_jobs", cty.BoolVal(g.IgnoreSystemJobs))
	d.SetAttributeValue("stop_jobs", strList(g.StopJobs))
}

// writeHealthy writes a healthy block (top level or a group's).
func writeHealthy(parent *hclwrite.Body, h HealthyConfig) {
	b := parent.AppendNewBlock("healthy", nil).Body()
	b.SetAttributeValue("deadline", durationVal(h.Deadline))
	b.SetAttributeValue("on_deadline", cty.StringVal(h.OnDeadline))
	b.SetAttributeValue("consul_checks", cty.BoolVal(h.ConsulChecks))
}

func (c *Config) writeFleetLock(root *hclwrite.Body) {
	fl := root.AppendNewBlock("fleetlock", nil).Body()
	fc := c.FleetLock
	fl.SetAttributeValue("enabled", cty.BoolVal(fc.Enabled))
	fl.SetAttributeValue("listen", cty.StringVal(fc.Listen))
	fl.SetAttributeValue("path_prefix", cty.StringVal(fc.PathPrefix))
	fl.SetAttributeValue("tls_cert", cty.StringVal(fc.TLSCert))
	fl.SetAttributeValue("tls_key", cty.StringVal(fc.TLSKey))
	fl.SetAttributeValue("client_ca", cty.StringVal(fc.ClientCA))
	fl.SetAttributeValue("max_body_bytes", cty.NumberIntVal(int64(fc.MaxBodyBytes)))
	fl.SetAttributeValue("allowed_ids", strList(fc.AllowedIDs))
	fl.SetAttributeValue("max_nodeless_slots", cty.NumberIntVal(int64(fc.MaxNodelessSlots)))
	fl.SetAttributeValue("request_timeout", durationVal(fc.RequestTimeout))
	fl.SetAttributeValue("rate_limit", cty.NumberIntVal(int64(fc.RateLimit)))
	fl.SetAttributeValue("client_cert_id", cty.StringVal(fc.ClientCertID))
	fl.SetAttributeValue("record_grace", durationVal(fc.RecordGrace))
	fl.SetAttributeValue("serve_metrics", cty.BoolVal(fc.ServeMetrics))
}

func (c *Config) writeTelemetry(root *hclwrite.Body) {
	t := root.AppendNewBlock("telemetry", nil).Body()
	t.SetAttributeValue("listen", cty.StringVal(c.Telemetry.Listen))
	t.SetAttributeValue("allowed_hosts", strList(c.Telemetry.AllowedHosts))
}

func strList(s []string) cty.Value {
	if len(s) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(s))
	for i, x := range s {
		vals[i] = cty.StringVal(x)
	}
	return cty.ListVal(vals)
}

func argvList(l [][]string) cty.Value {
	if len(l) == 0 {
		return cty.ListValEmpty(cty.List(cty.String))
	}
	vals := make([]cty.Value, len(l))
	for i, argv := range l {
		if len(argv) == 0 {
			vals[i] = cty.ListValEmpty(cty.String)
		} else {
			vals[i] = strList(argv)
		}
	}
	return cty.ListVal(vals)
}

// durationVal formats a duration the short way: "1h", "5m", "1h30m".
func durationVal(d time.Duration) cty.Value {
	return cty.StringVal(FormatDuration(d))
}

// FormatDuration formats d like time.Duration.String without the zero
// units at the end: "1h" rather than "1h0m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// LogValue gives slog a short summary of the local configuration, the token
// masked.
func (c *Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Group("nomad",
			slog.String("address", c.Nomad.Address),
			slog.String("region", c.Nomad.Region),
			slog.String("namespace", c.Nomad.Namespace),
			slog.Any("token", c.Nomad.Token),
			slog.Bool("tls", c.Nomad.CACert != "" || c.Nomad.ClientCert != "" || strings.HasPrefix(c.Nomad.Address, "https:")),
		),
		slog.String("state_prefix", c.State.Prefix),
		slog.Bool("coordinator", c.Coordinator.Enabled),
		slog.String("reboot_method", c.Agent.Reboot.Method),
		slog.Bool("fleetlock", c.FleetLock.Enabled),
	)
}

// Package doctor checks a Nomad cluster for what rollboot needs, read-only:
// the Nomad version, ACLs and the token's rights, the event broker, the
// clients' drivers, the agents' job on every node, the Consul and Vault
// servers' health reads, clock skew and the size of rollboot's Variables.
//
// The checks are pure functions of Inputs, which Read gathers through the
// narrow Source interface (Nomad implements it over nomad/api). Each Finding
// has a severity, what was found and how to fix it; an Error is something that
// blocks rollouts, a Warning something that blocks part of them or may.
// `rollboot doctor` prints them; the coordinator logs them once at start.
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/config"
)

// Severity says how much a finding matters.
type Severity int

// The severities, from the least to the most serious.
const (
	OK Severity = iota
	Info
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "ok"
}

// MarshalText writes the severity as its name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	for v := OK; v <= Error; v++ {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("severity %q: want ok, info, warning or error", b)
}

// Finding is the result of one check about one subject.
type Finding struct {
	// Check names the check ("nomad-version", "drivers", ...): stable, for
	// scripts.
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Subject is what the finding is about (a node, a policy, a variable);
	// "" for the cluster.
	Subject string `json:"subject,omitempty"`
	// What is one line saying what was found.
	What string `json:"what"`
	// Fix is a command to run or a file to apply; "" for OK findings.
	Fix string `json:"fix,omitempty"`
}

// The checks' names.
const (
	CheckVersion     = "nomad-version"
	CheckACL         = "acl"
	CheckToken       = "token"
	CheckRights      = "token-rights"
	CheckPolicies    = "acl-policies"
	CheckBroker      = "event-broker"
	CheckDrivers     = "drivers"
	CheckAgentJob    = "agent-job"
	CheckAgents      = "agents"
	CheckClusters    = "server-clusters"
	CheckCoordinator = "coordinator"
	CheckClock       = "clock"
	CheckVariables   = "variables"
)

// Check runs every check on in and returns the findings, the most serious
// first, each check's in the order it made them.
func Check(in Inputs) []Finding {
	if in.Unreachable != nil {
		return []Finding{{Check: CheckVersion, Severity: Error,
			What: fmt.Sprintf("cannot reach Nomad: %v", in.Unreachable),
			Fix:  "point NOMAD_ADDR (or -address, or nomad.address) at a Nomad agent's HTTP API, with NOMAD_CACERT and the other NOMAD_* TLS variables for https"}}
	}
	var out []Finding
	out = append(out, checkVersion(in.Version, in.Servers)...)
	out = append(out, checkACL(in.ACL, in.Options, in.Now)...)
	out = append(out, checkBroker(in.Broker)...)
	out = append(out, checkCoordinator(in.Coordinator, in.Now)...)
	out = append(out, checkDrivers(in)...)
	out = append(out, checkAgents(in)...)
	out = append(out, checkClusters(in.Clusters)...)
	out = append(out, checkClock(in.Clock, in.Hosts, in.Options.ClockTolerance)...)
	out = append(out, checkVariables(in.Variables, in.Options)...)
	slices.SortStableFunc(out, func(a, b Finding) int { return cmp.Compare(b.Severity, a.Severity) })
	return out
}

// Blocking reports whether any finding blocks rollouts (an Error).
func Blocking(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity >= Error })
}

// Count returns how many findings have severity s.
func Count(fs []Finding, s Severity) int {
	n := 0
	for _, f := range fs {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Log logs each finding that is not OK once, at WARN or ERROR (INFO for
// Info), with its fix: what the coordinator does at start.
func Log(log *slog.Logger, fs []Finding) {
	for _, f := range fs {
		var lvl slog.Level
		switch f.Severity {
		case OK:
			continue
		case Info:
			lvl = slog.LevelInfo
		case Warning:
			lvl = slog.LevelWarn
		default:
			lvl = slog.LevelError
		}
		attrs := []any{"check", f.Check}
		if f.Subject != "" {
			attrs = append(attrs, "subject", f.Subject)
		}
		if f.Fix != "" {
			attrs = append(attrs, "fix", f.Fix)
		}
		log.Log(context.Background(), lvl, "doctor: "+f.What, attrs...)
	}
}

// Options are what the checks compare with: rollboot's configuration.
type Options struct {
	// Namespace and Prefix locate rollboot's Variables.
	Namespace, Prefix string
	// AgentJob and AgentNamespace name the agents' system job ("": not checked).
	AgentJob, AgentNamespace string
	// ClockTolerance is the clock skew tolerated (default DefaultClockTolerance).
	ClockTolerance time.Duration
	// VariableWarnBytes is the size from which a Variable is reported as near
	// Nomad's limit (default DefaultVariableWarnBytes).
	VariableWarnBytes int
}

// OptionsFor are the checks' options for rollboot's configuration.
func OptionsFor(cfg *config.Compiled) Options {
	ns := cfg.Nomad.Namespace
	if ns == "" {
		ns = "default"
	}
	agentNS := cfg.Coordinator.AgentJobNamespace
	if agentNS == "" {
		agentNS = ns
	}
	return Options{Namespace: ns, Prefix: cfg.State.Prefix, AgentJob: cfg.Coordinator.AgentJob, AgentNamespace: agentNS}
}

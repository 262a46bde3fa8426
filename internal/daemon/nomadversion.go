package daemon

import (
	"fmt"
	"log/slog"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
)

// MinNomadVersion is the oldest Nomad rollboot supports: the coordinator
// election and the servers' reboot locks are Variable locks, which Nomad 1.7
// brought (nomad/variables_endpoint.go RenewLock; api/locks.go). Node pools
// (1.6) and the drain metadata rollboot reads back (LastDrain, 1.5) are older.
const MinNomadVersion = "1.7.0"

// AgentSelfAPI reads the Nomad agent rollboot talks to (nomad/api Agent).
type AgentSelfAPI interface {
	Self() (*api.AgentSelf, error)
}

// CheckNomadVersion refuses to run against a Nomad agent older than
// MinNomadVersion, with an error that says which version it found and what is
// needed. Clients are never newer than their servers (Nomad upgrades servers
// first), so the agent's version bounds the servers' from below. When the
// version cannot be read (no agent:read, an agent that does not say it), it
// says so and goes on: every call rollboot makes still fails on its own if
// Nomad lacks it.
func CheckNomadVersion(a AgentSelfAPI, log *slog.Logger) error {
	self, err := a.Self()
	if err != nil {
		log.Warn("cannot read the Nomad agent's version: going on without checking it", "err", err, "needed", ">= "+MinNomadVersion)
		return nil
	}
	v, where := agentVersion(self)
	if v == "" {
		log.Warn("the Nomad agent does not say its version: going on without checking it", "needed", ">= "+MinNomadVersion)
		return nil
	}
	have, err := version.NewVersion(v)
	if err != nil {
		log.Warn("cannot parse the Nomad agent's version: going on without checking it", "version", v, "err", err)
		return nil
	}
	if have.Core().LessThan(version.Must(version.NewVersion(MinNomadVersion))) {
		return fmt.Errorf("nomad %s (the %s of the agent at the configured address) is too old: rollboot needs Nomad %s or newer (Variable locks)",
			v, where, MinNomadVersion)
	}
	return nil
}

// agentVersion returns the agent's Nomad version from /v1/agent/self: its
// configuration's Version (command/agent/config.go Config.Version), else a
// server's Serf build tag; and where it was found.
func agentVersion(self *api.AgentSelf) (string, string) {
	if cfg, ok := self.Config["Version"].(map[string]any); ok {
		if v, ok := cfg["Version"].(string); ok && v != "" {
			if pre, _ := cfg["VersionPrerelease"].(string); pre != "" {
				v += "-" + pre
			}
			return v, "version"
		}
	}
	if b := self.Member.Tags["build"]; b != "" {
		return b, "server build"
	}
	return "", ""
}

package doctor

import (
	"fmt"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
)

// MinNomadVersion is the oldest Nomad rollboot supports: the coordinator
// election and the servers' reboot locks are Variable locks, which Nomad 1.7
// brought (nomad/variables_endpoint.go RenewLock; api/locks.go). Node pools
// (1.6) and the drain metadata rollboot reads back (LastDrain, 1.5) are older.
const MinNomadVersion = "1.7.0"

// AgentVersion returns the agent's Nomad version from /v1/agent/self: its
// configuration's Version (command/agent/config.go Config.Version), else a
// server's Serf build tag; and where it was found ("" when neither says).
func AgentVersion(self *api.AgentSelf) (v, where string) {
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

// VersionVerdict compares the agent's version with MinNomadVersion: tooOld
// says why it is too old; unknown, when not "", why it could not be told.
// Clients are never newer than their servers (Nomad upgrades servers first),
// so the agent's version bounds the servers' from below.
func VersionVerdict(self *api.AgentSelf) (v string, tooOld error, unknown string) {
	v, where := AgentVersion(self)
	if v == "" {
		return "", nil, "the Nomad agent does not say its version"
	}
	have, err := version.NewVersion(v)
	if err != nil {
		return v, nil, fmt.Sprintf("cannot parse the Nomad agent's version %q: %v", v, err)
	}
	if have.Core().LessThan(version.Must(version.NewVersion(MinNomadVersion))) {
		return v, fmt.Errorf("nomad %s (the %s of the agent at the configured address) is too old: rollboot needs Nomad %s or newer (Variable locks)",
			v, where, MinNomadVersion), ""
	}
	return v, nil, ""
}

// checkVersion: a Nomad older than MinNomadVersion blocks everything. Without
// agent:read (the shipped policies grant none), the servers' build tags,
// which the member list shows with node:read, tell the versions that matter:
// Variable locks are the servers'.
func checkVersion(in VersionInput, servers []*api.AgentMember) []Finding {
	f := Finding{Check: CheckVersion}
	self := in.Self
	if in.Err != nil {
		self = oldestServer(servers)
	}
	if self == nil {
		f.Severity, f.What = Warning, fmt.Sprintf("cannot read the Nomad agent's version (GET /v1/agent/self): %v", in.Err)
		f.Fix = "check `nomad version` on the servers: rollboot needs Nomad " + MinNomadVersion + " or newer"
		return []Finding{f}
	}
	v, tooOld, unknown := VersionVerdict(self)
	switch {
	case tooOld != nil:
		f.Severity, f.What = Error, tooOld.Error()
		f.Fix = "upgrade the Nomad servers, then the clients, to " + MinNomadVersion + " or newer (https://developer.hashicorp.com/nomad/docs/upgrade)"
	case unknown != "":
		f.Severity, f.What = Warning, unknown
		f.Fix = "check `nomad version` on the servers: rollboot needs Nomad " + MinNomadVersion + " or newer"
	default:
		f.What = fmt.Sprintf("Nomad %s (rollboot needs %s or newer)", v, MinNomadVersion)
	}
	return []Finding{f}
}

// oldestServer is the server member with the oldest build, as an agent's self
// that names only it; nil when none has a build that parses.
func oldestServer(servers []*api.AgentMember) *api.AgentSelf {
	var oldest *version.Version
	var build string
	for _, m := range servers {
		v, err := version.NewVersion(m.Tags["build"])
		if err == nil && (oldest == nil || v.LessThan(oldest)) {
			oldest, build = v, m.Tags["build"]
		}
	}
	if oldest == nil {
		return nil
	}
	return &api.AgentSelf{Member: api.AgentMember{Tags: map[string]string{"build": build}}}
}

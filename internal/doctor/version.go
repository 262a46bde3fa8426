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
	tooOld, unknown = VersionOf(v, "the "+where+" of the agent at the configured address")
	return v, tooOld, unknown
}

// VersionOf compares v, a Nomad version found in source (what the messages
// call it), with MinNomadVersion, as VersionVerdict does.
func VersionOf(v, source string) (tooOld error, unknown string) {
	have, err := version.NewVersion(v)
	if err != nil {
		return nil, fmt.Sprintf("cannot parse the Nomad version %q (%s): %v", v, source, err)
	}
	if have.Core().LessThan(version.Must(version.NewVersion(MinNomadVersion))) {
		return fmt.Errorf("nomad %s (%s) is too old: rollboot needs Nomad %s or newer (Variable locks)",
			v, source, MinNomadVersion), ""
	}
	return nil, ""
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
		if g := drainAuthorFinding(v); g != nil {
			return []Finding{f, *g}
		}
	}
	return []Finding{f}
}

// DrainAuthorVersion is the first Nomad that records who drained a node
// (LastDrain.AccessorID from the request's identity, "client:<node ID>" for
// a client's own drain on shutdown: nomad/node_endpoint.go UpdateDrain,
// nomad#20317, in 1.7.7 and 1.8.0). rollboot tells a client's drain_on_shutdown
// from an operator's drain by it (phase/selfdrain.go).
const DrainAuthorVersion = "1.7.7"

// drainAuthorFinding says, of a Nomad that rollboot supports but that does
// not record who drained, what that means for clients with drain_on_shutdown;
// nil for a newer one.
func drainAuthorFinding(v string) *Finding {
	have, err := version.NewVersion(v)
	if err != nil || !have.Core().LessThan(version.Must(version.NewVersion(DrainAuthorVersion))) {
		return nil
	}
	return &Finding{Check: CheckVersion, Severity: Info,
		What: fmt.Sprintf("Nomad %s does not record who drained a node (%s does): the drain a client with drain_on_shutdown makes at each reboot reads as someone else's, and interrupts the host's cycle", v, DrainAuthorVersion),
		Fix:  "upgrade the Nomad servers to " + DrainAuthorVersion + " or newer, or take drain_on_shutdown out of the clients' configuration (rollboot drains the node before the reboot anyway)"}
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

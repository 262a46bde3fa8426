package daemon

import (
	"log/slog"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/doctor"
)

// MinNomadVersion is the oldest Nomad rollboot supports (doctor.MinNomadVersion).
const MinNomadVersion = doctor.MinNomadVersion

// AgentSelfAPI reads the Nomad agent rollboot talks to (nomad/api Agent).
type AgentSelfAPI interface {
	Self() (*api.AgentSelf, error)
}

// CheckNomadVersion refuses to run against a Nomad agent older than
// MinNomadVersion, with an error that says which version it found and what is
// needed (doctor.VersionVerdict). When the version cannot be read (no
// agent:read, an agent that does not say it), it says so and goes on: every
// call rollboot makes still fails on its own if Nomad lacks it.
func CheckNomadVersion(a AgentSelfAPI, log *slog.Logger) error {
	self, err := a.Self()
	if err != nil {
		log.Warn("cannot read the Nomad agent's version: going on without checking it", "err", err, "needed", ">= "+MinNomadVersion)
		return nil
	}
	v, tooOld, unknown := doctor.VersionVerdict(self)
	return judged(v, tooOld, unknown, log)
}

// judged is the verdict on version v: tooOld, or nil with a warning when it
// could not be told (unknown, doctor.VersionOf).
func judged(v string, tooOld error, unknown string, log *slog.Logger) error {
	if unknown != "" {
		log.Warn(unknown+": going on without checking it", "version", v, "needed", ">= "+MinNomadVersion)
		return nil
	}
	return tooOld
}

// AgentNomadVersion is the agent's check of its local Nomad
// (agent.Options.NomadVersion): on a host with a client, the version its node
// lists (NodeListStub.Version, the client's nomad.version attribute: the node
// list the agent reads anyway to find its node, with node:read, where
// /v1/agent/self needs agent:read, which the shipped agent tokens lack); on
// a host without one, or a node that does not say, the local agent's self,
// as CheckNomadVersion reads it.
func AgentNomadVersion(a AgentSelfAPI, host string, log *slog.Logger) func(clientVersion string) error {
	return func(v string) error {
		if v == "" {
			return CheckNomadVersion(a, log)
		}
		tooOld, unknown := doctor.VersionOf(v, "the client version of node "+host)
		return judged(v, tooOld, unknown, log)
	}
}

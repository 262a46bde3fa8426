// Package health holds the server quorum gates of rollboot (invariant 2): never
// reboot a Nomad, Consul or Vault server unless its cluster is healthy and can lose
// one more server, and do not call a rebooted server back until it rejoined.
//
// The package has two layers:
//
//   - pure decisions (this file): PreRebootGate, PostRebootGate and NeedsHandOver
//     are functions of an observed ClusterHealth, table-tested without I/O;
//   - thin readers (nomad.go, consul.go, vault.go) that turn each product's
//     autopilot view into a ClusterHealth.
//
// Which servers run on a host is package discovery's; moving a leader off a host
// before it reboots is package handover's (it returns this package's
// DeniedError).
//
// "At most one server per cluster at once" is not decided here: the coordinator
// grants at most one server host per (Product, Cluster) and asks these gates first.
package health

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Product names a server product whose quorum the gates protect.
type Product string

// The products.
const (
	Nomad  Product = "nomad"
	Consul Product = "consul"
	Vault  Product = "vault"
)

// ClusterHealth is one product cluster's health as observed at one moment.
type ClusterHealth struct {
	Product Product
	// Cluster is the Nomad region, the Consul datacenter or the Vault cluster name.
	Cluster string
	// Err is set when the health could not be read; every gate is then closed.
	Err error

	Healthy          bool
	FailureTolerance int
	// Leader is the Raft ID of the leader (the active node for Vault); "" when
	// there is none.
	Leader  string
	Servers []ServerHealth
}

// ServerHealth is one server of the Raft configuration as autopilot reports it.
type ServerHealth struct {
	ID      string // Raft ID (Vault: node_id)
	Name    string
	Address string // Raft address
	Healthy bool
	Voter   bool
	Leader  bool
	// StableSince is when Healthy last changed.
	StableSince time.Time
	// Sealed is set for a Vault node whose own sys/health says it is sealed. It is
	// false when the node was not asked (see ReadVault).
	Sealed bool
}

// Server returns the server with the Raft ID id.
func (h ClusterHealth) Server(id string) (ServerHealth, bool) {
	for _, s := range h.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return ServerHealth{}, false
}

// Label names the cluster in reasons and errors: the product, and the cluster
// name when known (nomad "global").
func (h ClusterHealth) Label() string {
	if h.Cluster == "" {
		return string(h.Product)
	}
	return fmt.Sprintf("%s %q", h.Product, h.Cluster)
}

func serverLabel(s ServerHealth) string {
	if s.Name != "" && s.Name != s.ID {
		return fmt.Sprintf("%s (%s)", s.Name, s.ID)
	}
	return s.ID
}

// PreRebootGate says whether the host that runs server serverID may reboot now. It
// is open only when the health was read, the server is in the Raft configuration,
// the cluster has a leader and is healthy, its failure tolerance is at least 1,
// and every other server is healthy (and, for Vault, not sealed). The reason says
// why a closed gate is closed, or what was checked for an open one.
func PreRebootGate(h ClusterHealth, serverID string) (ok bool, reason string) {
	if h.Err != nil {
		return false, fmt.Sprintf("%s health unknown: %v", h.Label(), h.Err)
	}
	if len(h.Servers) == 0 {
		return false, noAutopilotState(h)
	}
	if _, found := h.Server(serverID); !found {
		return false, fmt.Sprintf("%s: server %s is not in the Raft configuration", h.Label(), serverID)
	}
	var unhealthy, sealed []string
	for _, s := range h.Servers {
		if s.ID == serverID {
			continue
		}
		if s.Sealed {
			sealed = append(sealed, serverLabel(s))
		}
		if !s.Healthy {
			unhealthy = append(unhealthy, serverLabel(s))
		}
	}
	sort.Strings(unhealthy)
	sort.Strings(sealed)
	switch {
	case len(sealed) > 0:
		return false, fmt.Sprintf("%s: other server sealed: %s", h.Label(), strings.Join(sealed, ", "))
	case len(unhealthy) > 0:
		return false, fmt.Sprintf("%s: other server not healthy: %s", h.Label(), strings.Join(unhealthy, ", "))
	case h.Leader == "":
		return false, fmt.Sprintf("%s: no leader", h.Label())
	case !h.Healthy:
		return false, fmt.Sprintf("%s: cluster not healthy", h.Label())
	case h.FailureTolerance < 1:
		return false, fmt.Sprintf("%s: failure tolerance %d, cannot lose a server", h.Label(), h.FailureTolerance)
	}
	return true, fmt.Sprintf("%s: healthy, failure tolerance %d", h.Label(), h.FailureTolerance)
}

// PostRebootGate says whether server serverID is back after its host rebooted: it
// is in the Raft configuration, healthy, a voter again, stable for at least
// minStable at now, the cluster has a leader and is healthy; a Vault node must be
// unsealed (the reason then says an unseal is needed). The reason of a closed
// gate depends on h alone, never on now: the coordinator stores it as the hold
// of the host's plan, and the same clusters must give the same plan.
//
// A voter again: autopilot's dead-server cleanup (on by default in Nomad and
// Consul) removes a server that stays down, and the leader adds it back as a
// non-voter that autopilot promotes only after its stabilization time
// (raft-autopilot). Until then the cluster cannot lose another server: freeing
// the slot earlier would let the next server host reboot with a quorum of two.
func PostRebootGate(h ClusterHealth, serverID string, now time.Time, minStable time.Duration) (ok bool, reason string) {
	if h.Err != nil {
		return false, fmt.Sprintf("%s health unknown: %v", h.Label(), h.Err)
	}
	s, found := h.Server(serverID)
	switch {
	case len(h.Servers) == 0:
		return false, noAutopilotState(h)
	case !found:
		return false, fmt.Sprintf("%s: server %s is not back in the Raft configuration", h.Label(), serverID)
	case s.Sealed:
		return false, fmt.Sprintf("%s: server %s is sealed: an unseal is needed", h.Label(), serverLabel(s))
	case !s.Healthy:
		return false, fmt.Sprintf("%s: server %s is not healthy yet", h.Label(), serverLabel(s))
	case !s.Voter:
		return false, fmt.Sprintf("%s: server %s is back as a non-voter: waiting for autopilot to promote it", h.Label(), serverLabel(s))
	case s.StableSince.IsZero():
		return false, fmt.Sprintf("%s: server %s healthy, not yet reported stable (needs %s)", h.Label(), serverLabel(s), minStable)
	case now.Sub(s.StableSince) < minStable:
		// Not how long it has been healthy: the reason is stored in the plan
		// of the host it holds, and a text that moved with now rewrote that
		// plan at every pass (a change each pass on the same input, which the
		// coordinator chains passes for). The time it became healthy is the
		// cluster's, and says the same.
		return false, fmt.Sprintf("%s: server %s healthy since %s, not yet stable for %s", h.Label(), serverLabel(s),
			s.StableSince.UTC().Format(time.RFC3339), minStable)
	case h.Leader == "":
		return false, fmt.Sprintf("%s: no leader", h.Label())
	case !h.Healthy:
		return false, fmt.Sprintf("%s: cluster not healthy", h.Label())
	}
	return true, fmt.Sprintf("%s: server %s back and stable", h.Label(), serverLabel(s))
}

// StableAt is when server serverID will have been stable for minStable, as
// the cluster reports it (zero when it is not healthy, or its stability is not
// reported): the time PostRebootGate's stability wait ends.
func StableAt(h ClusterHealth, serverID string, minStable time.Duration) time.Time {
	s, ok := h.Server(serverID)
	if h.Err != nil || !ok || !s.Healthy || s.StableSince.IsZero() {
		return time.Time{}
	}
	return s.StableSince.Add(minStable)
}

// noAutopilotState is the reason for a health reply without servers: a new
// leader's autopilot reports an empty state until its first pass.
func noAutopilotState(h ClusterHealth) string {
	return fmt.Sprintf("%s: autopilot reports no servers yet (a new leader's first pass has not run)", h.Label())
}

// NeedsHandOver reports whether serverID leads its cluster (for Vault: is the
// active node), so leadership should move before its host reboots. An unreadable
// health (Err) reports false: PreRebootGate is closed then anyway.
func NeedsHandOver(h ClusterHealth, serverID string) bool {
	if h.Err != nil || serverID == "" {
		return false
	}
	if h.Leader == serverID {
		return true
	}
	s, ok := h.Server(serverID)
	return ok && s.Leader
}

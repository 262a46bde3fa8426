package health

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// VaultHealth is the part of *vaultapi.Sys that reads one node's own sys/health.
type VaultHealth interface {
	HealthWithContext(ctx context.Context) (*vaultapi.HealthResponse, error)
}

// VaultAutopilot is the part of *vaultapi.Sys that ReadVault uses on the cluster
// address.
type VaultAutopilot interface {
	VaultHealth
	RaftAutopilotStateWithContext(ctx context.Context) (*vaultapi.AutopilotState, error)
}

// ReadVault reads GET /v1/sys/storage/raft/autopilot/state (needs a token with
// read on it; forwarded to the active node) and the cluster name from sys/health
// of the cluster address. Vault's autopilot has no API address per server, so the
// seal status of a node is read only when the caller gives a client of that node
// in nodes (keyed by node ID): its own sys/health. A node in nodes whose sys/health
// cannot be read is counted unhealthy (it may be down or sealed). Failures of the
// cluster reads are in ClusterHealth.Err.
func ReadVault(ctx context.Context, sys VaultAutopilot, nodes map[string]VaultHealth) ClusterHealth {
	out := ClusterHealth{Product: Vault}
	hr, err := sys.HealthWithContext(ctx)
	if err != nil {
		out.Err = fmt.Errorf("read vault sys/health: %w", err)
		return out
	}
	out.Cluster = hr.ClusterName
	state, err := sys.RaftAutopilotStateWithContext(ctx)
	if err == nil && state == nil {
		err = errors.New("not found (is the storage raft?)")
	}
	if err != nil {
		out.Err = fmt.Errorf("read vault autopilot state: %w", err)
		return out
	}
	out.Healthy, out.FailureTolerance, out.Leader = state.Healthy, state.FailureTolerance, state.Leader
	ids := make([]string, 0, len(state.Servers))
	for id := range state.Servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	voters := map[string]bool{}
	for _, id := range state.Voters {
		voters[id] = true
	}
	for _, id := range ids {
		s := state.Servers[id]
		sh := ServerHealth{
			ID: s.ID, Name: s.Name, Address: s.Address, Healthy: s.Healthy,
			Voter:  voters[s.ID] || s.Status == "leader" || s.Status == "voter",
			Leader: s.ID == state.Leader,
		}
		if s.StableSince != "" {
			t, perr := time.Parse(time.RFC3339Nano, s.StableSince)
			if perr != nil {
				out.Err = fmt.Errorf("vault autopilot state: server %s: stable_since %q: %w", s.ID, s.StableSince, perr)
				return out
			}
			sh.StableSince = t
		}
		if node, ok := nodes[s.ID]; ok {
			nh, nerr := node.HealthWithContext(ctx)
			switch {
			case nerr != nil:
				sh.Healthy = false
			case nh.Sealed || !nh.Initialized:
				sh.Sealed, sh.Healthy = true, false
			}
			if !sh.Healthy {
				out.Healthy = false
			}
		}
		out.Servers = append(out.Servers, sh)
	}
	return out
}

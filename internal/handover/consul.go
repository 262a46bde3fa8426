package handover

import (
	"context"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/health"
)

// ConsulOperator is the part of *consulapi.Operator that Consul uses.
type ConsulOperator interface {
	health.ConsulAutopilot
	RaftLeaderTransfer(id string, q *consulapi.QueryOptions) (*consulapi.TransferLeaderResponse, error)
}

// ConsulAgent is the part of *consulapi.Agent that ConsulMaintenance uses.
type ConsulAgent interface {
	EnableNodeMaintenance(reason string) error
	DisableNodeMaintenance() error
}

// Consul moves the Consul leadership off serverID (a Raft ID) to the healthy
// voter with the lowest ID, with POST /v1/operator/raft/transfer-leader (Consul ≥
// 1.15, operator:write), then waits (bounded by ctx) until a leader other than
// serverID is elected. It does nothing when serverID does not lead. A 403 is a
// *health.DeniedError.
func Consul(ctx context.Context, op ConsulOperator, serverID string) error {
	h := health.ReadConsul(ctx, op, "")
	if h.Err != nil {
		return denied(health.Consul, "hand-over: read autopilot", "operator:read", h.Err)
	}
	if !health.NeedsHandOver(h, serverID) {
		return nil
	}
	target, err := pickTarget(h, serverID)
	if err != nil {
		return fmt.Errorf("hand over consul leadership: %w", err)
	}
	resp, err := op.RaftLeaderTransfer(target, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return denied(health.Consul, fmt.Sprintf("transfer leadership from %s to %s", serverID, target), "operator:write", err)
	}
	if resp != nil && !resp.Success {
		return fmt.Errorf("transfer consul leadership from %s to %s: not successful", serverID, target)
	}
	return awaitNewLeader(ctx, "a new consul leader", func() health.ClusterHealth {
		return health.ReadConsul(ctx, op, "")
	}, serverID)
}

// ConsulMaintenance enables or disables node maintenance on the LOCAL Consul agent
// (PUT /v1/agent/maintenance, node:write on the node). Consul persists the check,
// so it survives the reboot: disable it after boot. Enabling twice is a no-op. The
// Consul client has no context variant of this call: ctx is checked before it, and
// the request itself is bounded by the client's HTTP timeout.
func ConsulMaintenance(ctx context.Context, agent ConsulAgent, enable bool, reason string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("consul maintenance: %w", err)
	}
	var err error
	if enable {
		err = agent.EnableNodeMaintenance(reason)
	} else {
		err = agent.DisableNodeMaintenance()
	}
	if err != nil {
		return denied(health.Consul, fmt.Sprintf("node maintenance enable=%t", enable), "node:write on this node", err)
	}
	return nil
}

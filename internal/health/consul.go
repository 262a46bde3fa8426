package health

import (
	"context"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
)

// ConsulAutopilot is the part of *consulapi.Operator that ReadConsul uses.
type ConsulAutopilot interface {
	AutopilotServerHealth(q *consulapi.QueryOptions) (*consulapi.OperatorHealthReply, error)
	AutopilotState(q *consulapi.QueryOptions) (*consulapi.AutopilotState, error)
}

// ConsulOperator is the part of *consulapi.Operator that HandOverConsul uses.
type ConsulOperator interface {
	ConsulAutopilot
	RaftLeaderTransfer(id string, q *consulapi.QueryOptions) (*consulapi.TransferLeaderResponse, error)
}

// ConsulAgent is the part of *consulapi.Agent that ConsulMaintenance uses.
type ConsulAgent interface {
	EnableNodeMaintenance(reason string) error
	DisableNodeMaintenance() error
}

// ReadConsul reads GET /v1/operator/autopilot/health (the client accepts its 200
// and 429) and GET /v1/operator/autopilot/state for the leader, both operator:read,
// of datacenter (the agent's own when ""; Discover reports it). Failures are in
// ClusterHealth.Err.
func ReadConsul(ctx context.Context, op ConsulAutopilot, datacenter string) ClusterHealth {
	out := ClusterHealth{Product: Consul, Cluster: datacenter}
	q := (&consulapi.QueryOptions{Datacenter: datacenter}).WithContext(ctx)
	reply, err := op.AutopilotServerHealth(q)
	if err != nil {
		out.Err = fmt.Errorf("read consul autopilot health: %w", err)
		return out
	}
	state, err := op.AutopilotState(q)
	if err != nil {
		out.Err = fmt.Errorf("read consul autopilot state: %w", err)
		return out
	}
	out.Healthy, out.FailureTolerance, out.Leader = reply.Healthy, reply.FailureTolerance, state.Leader
	for _, s := range reply.Servers {
		out.Servers = append(out.Servers, ServerHealth{
			ID: s.ID, Name: s.Name, Address: s.Address, Healthy: s.Healthy, Voter: s.Voter,
			Leader: s.ID == state.Leader, StableSince: s.StableSince,
		})
	}
	return out
}

// HandOverConsul moves the Consul leadership off serverID (a Raft ID) to the
// healthy voter with the lowest ID, with POST /v1/operator/raft/transfer-leader
// (Consul ≥ 1.15, operator:write), then waits (bounded by ctx) until a leader other
// than serverID is elected. It does nothing when serverID does not lead. A 403 is
// a *DeniedError.
func HandOverConsul(ctx context.Context, op ConsulOperator, serverID string) error {
	h := ReadConsul(ctx, op, "")
	if h.Err != nil {
		return denied(Consul, "hand-over: read autopilot", "operator:read", h.Err)
	}
	if !NeedsHandOver(h, serverID) {
		return nil
	}
	target, err := pickTarget(h, serverID)
	if err != nil {
		return fmt.Errorf("hand over consul leadership: %w", err)
	}
	resp, err := op.RaftLeaderTransfer(target, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return denied(Consul, fmt.Sprintf("transfer leadership from %s to %s", serverID, target), "operator:write", err)
	}
	if resp != nil && !resp.Success {
		return fmt.Errorf("transfer consul leadership from %s to %s: not successful", serverID, target)
	}
	return poll(ctx, "a new consul leader", func() (bool, error) {
		return newLeaderElsewhere(ReadConsul(ctx, op, ""), serverID)
	})
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
		return denied(Consul, fmt.Sprintf("node maintenance enable=%t", enable), "node:write on this node", err)
	}
	return nil
}

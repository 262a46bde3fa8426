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

package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	nomadapi "github.com/hashicorp/nomad/api"
)

// NomadAutopilot is the part of *nomadapi.Operator that ReadNomad uses.
type NomadAutopilot interface {
	AutopilotServerHealth(q *nomadapi.QueryOptions) (*nomadapi.OperatorHealthReply, *nomadapi.QueryMeta, error)
}

// ReadNomad reads GET /v1/operator/autopilot/health (operator:read) of the Nomad
// region (the client's default when region is ""). Nomad answers 429 with the same
// body when the cluster is unhealthy, and its Go client turns every non-200 into
// an api.UnexpectedResponseError: the 429 body is parsed as the reply. Any other
// failure is returned in ClusterHealth.Err.
func ReadNomad(ctx context.Context, op NomadAutopilot, region string) ClusterHealth {
	out := ClusterHealth{Product: Nomad, Cluster: region}
	q := (&nomadapi.QueryOptions{Region: region}).WithContext(ctx)
	reply, _, err := op.AutopilotServerHealth(q)
	if err != nil {
		reply, err = nomadHealthFrom429(err)
	}
	if err != nil {
		out.Err = fmt.Errorf("read nomad autopilot health: %w", err)
		return out
	}
	out.Healthy, out.FailureTolerance, out.Leader = reply.Healthy, reply.FailureTolerance, reply.Leader
	for _, s := range reply.Servers {
		out.Servers = append(out.Servers, ServerHealth{
			ID: s.ID, Name: s.Name, Address: s.Address, Healthy: s.Healthy, Voter: s.Voter,
			Leader: s.Leader, StableSince: s.StableSince,
		})
		if out.Leader == "" && s.Leader {
			out.Leader = s.ID
		}
	}
	return out
}

// nomadHealthFrom429 decodes the body of a 429 answer (reference §4); other errors
// are returned as they are.
func nomadHealthFrom429(err error) (*nomadapi.OperatorHealthReply, error) {
	var ure nomadapi.UnexpectedResponseError
	if !errors.As(err, &ure) || ure.StatusCode() != http.StatusTooManyRequests {
		return nil, err
	}
	var reply nomadapi.OperatorHealthReply
	if jerr := json.Unmarshal([]byte(ure.Body()), &reply); jerr != nil {
		return nil, fmt.Errorf("decode 429 body: %v: %w", jerr, err)
	}
	return &reply, nil
}

package handover

import (
	"context"
	"fmt"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
)

// NomadOperator is the part of *nomadapi.Operator that Nomad uses.
type NomadOperator interface {
	health.NomadAutopilot
	RaftTransferLeadershipByID(id string, q *nomadapi.WriteOptions) error
}

// Nomad moves the Nomad leadership off serverID (a Raft ID) to the healthy voter
// with the lowest ID, with PUT /v1/operator/raft/transfer-leadership, then waits
// (bounded by ctx) until a leader other than serverID is elected. It does nothing
// when serverID does not lead. Transferring needs a management token: a 403 (of
// the transfer, or of the autopilot read before it) is returned as a
// *health.DeniedError (errors.Is(err, health.ErrDenied)).
func Nomad(ctx context.Context, op NomadOperator, serverID string) error {
	h := health.ReadNomad(ctx, op, "")
	if h.Err != nil {
		return denied(health.Nomad, "hand-over: read autopilot health", "operator:read", h.Err)
	}
	if !health.NeedsHandOver(h, serverID) {
		return nil
	}
	target, err := pickTarget(h, serverID)
	if err != nil {
		return fmt.Errorf("hand over nomad leadership: %w", err)
	}
	if err := op.RaftTransferLeadershipByID(target, (&nomadapi.WriteOptions{}).WithContext(ctx)); err != nil {
		return denied(health.Nomad, fmt.Sprintf("transfer leadership from %s to %s", serverID, target), "a management token", err)
	}
	return awaitNewLeader(ctx, "a new nomad leader", func() health.ClusterHealth {
		return health.ReadNomad(ctx, op, "")
	}, serverID)
}

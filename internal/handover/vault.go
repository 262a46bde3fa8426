package handover

import (
	"context"
	"fmt"

	"github.com/rollboot/rollboot/internal/health"
)

// VaultStepDown is the part of *vaultapi.Sys that Vault uses.
type VaultStepDown interface {
	health.VaultAutopilot
	StepDownWithContext(ctx context.Context) error
}

// Vault makes the active Vault node nodeID step down (PUT sys/step-down,
// update+sudo; a standby forwards it to whichever node is active, so the active
// node is checked first) and waits (bounded by ctx) until another node is active.
// It does nothing when nodeID is not active. A 403 (of the step-down, or of the
// autopilot read before it) is a *health.DeniedError.
func Vault(ctx context.Context, sys VaultStepDown, nodeID string) error {
	h := health.ReadVault(ctx, sys, nil)
	if h.Err != nil {
		return denied(health.Vault, "step-down: read autopilot state", "read on sys/storage/raft/autopilot/state", h.Err)
	}
	if !health.NeedsHandOver(h, nodeID) {
		return nil
	}
	if _, err := pickTarget(h, nodeID); err != nil {
		return fmt.Errorf("vault step-down: %w", err)
	}
	if err := sys.StepDownWithContext(ctx); err != nil {
		return denied(health.Vault, "step-down of "+nodeID, "update and sudo on sys/step-down", err)
	}
	return awaitNewLeader(ctx, "a new active vault node", func() health.ClusterHealth {
		return health.ReadVault(ctx, sys, nil)
	}, nodeID)
}

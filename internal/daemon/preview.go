package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/preview"
	"github.com/rollboot/rollboot/internal/store"
)

// Preview previews the rollout under cfg's policy (`rollboot plan`): a
// coordinator built from cfg, as RunCoordinator builds it, observes the cluster
// and says what its pass would decide at now, and the estimates come from
// history. It only reads: no plan, drain or history is written.
func Preview(ctx context.Context, cfg *config.Compiled, c *api.Client, clusters coordinator.ClusterAccess,
	history []store.HistoryRecord, now time.Time) (preview.Plan, error) {
	opts := coordinatorOptions(cfg, c, Store(cfg, c), slog.New(slog.DiscardHandler), clusters)
	opts.Now = func() time.Time { return now }
	res, err := coordinator.New(opts).Preview(ctx)
	if err != nil {
		return preview.Plan{}, fmt.Errorf("preview: %w", err)
	}
	return preview.Build(preview.Input{Now: now, Observed: res, DrainDeadline: cfg.Drain.Deadline, History: history}), nil
}

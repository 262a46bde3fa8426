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
	opts.Policy = nil // cfg holds the rules to preview: the stored ones, or a candidate's
	res, err := coordinator.New(opts).Preview(ctx)
	if err != nil {
		return preview.Plan{}, fmt.Errorf("preview: %w", err)
	}
	settle := map[string]time.Duration{cfg.Policy.Default.Name: cfg.Policy.Default.Settle}
	for _, g := range cfg.Policy.Groups {
		settle[g.Name] = g.Settle
	}
	soak, afterSoak := map[string]time.Duration{}, map[string]time.Duration{}
	for _, g := range cfg.Groups {
		soak[g.Name], afterSoak[g.Name] = g.Canary.Soak, g.AfterSoak
	}
	deadlines := map[string]time.Duration{}
	for _, g := range cfg.Groups {
		deadlines[g.Name] = g.Drain.Deadline // the top-level one unless the group sets its own
	}
	return preview.Build(preview.Input{Now: now, Observed: res, DrainDeadline: cfg.Drain.Deadline,
		GroupDrainDeadlines: deadlines, History: history, Settle: settle, CanarySoak: soak, AfterSoak: afterSoak}), nil
}

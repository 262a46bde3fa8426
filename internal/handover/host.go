package handover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// Clusters hands the leadership of a product's cluster over from one of its
// servers (the coordinator's ClusterAccess).
type Clusters interface {
	HandOver(ctx context.Context, product, serverID string) error
}

// FromHost hands the leadership of product over from the host's server, each
// attempt bounded to 30 s. Without the permission to (Nomad's needs a
// management token) it logs so, as the policy says (hold: the host waits;
// otherwise it reboots as leader and the cluster elects another), and returns
// the refusal as denied with no error.
func FromHost(ctx context.Context, clusters Clusters, rec *store.HostRecord, product string, hold bool, log *slog.Logger) (denied string, err error) {
	if rec == nil {
		return "", nil
	}
	for _, srv := range rec.Servers {
		if srv.Product != product {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := clusters.HandOver(hctx, product, srv.ID)
		cancel()
		if errors.Is(err, health.ErrDenied) {
			if hold {
				log.Error("leadership hand-over refused; holding the host (policy: hold)",
					"host", rec.Host, "product", product, "err", err)
			} else {
				log.Error("leadership hand-over refused; the host reboots as leader and the cluster elects another (policy: continue)",
					"host", rec.Host, "product", product, "err", err)
			}
			return err.Error(), nil
		}
		if err != nil {
			return "", fmt.Errorf("hand over %s leadership from %s: %w", product, rec.Host, err)
		}
		log.Info("leadership handed over", "host", rec.Host, "product", product)
	}
	return "", nil
}

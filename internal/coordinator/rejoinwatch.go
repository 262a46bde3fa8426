package coordinator

import (
	"context"
	"maps"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/watch"
)

// checkWatchers watch the Consul checks of the nodes whose hosts wait for them
// to pass (healthy.consul_checks) with blocking queries on
// /v1/health/node/<node>, and poke the reconcile loop when they change: a check
// turns passing without any change Nomad would show. Each runs until its node no
// longer needs it or ctx ends.
type checkWatchers struct {
	watchSet
	poke func()
	c    *Coordinator
}

// set watches exactly the Consul nodes the last pass read checks of (called
// by the pass goroutine, between passes).
func (w *checkWatchers) set() {
	if w.c.opt.ConsulHealth == nil {
		return
	}
	w.watchSet.set(maps.Clone(w.c.checkNodes), func(ctx context.Context, node string) {
		watch.Loop{Query: func(ctx context.Context, idx uint64) (uint64, error) {
			q := (&consulapi.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
			_, meta, err := w.c.opt.ConsulHealth.Node(node, q)
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}, OnChange: func(uint64) { w.poke() }}.Run(ctx)
	})
}

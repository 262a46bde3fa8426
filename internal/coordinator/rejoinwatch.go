package coordinator

import (
	"context"
	"maps"
	"sync"
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
	ctx     context.Context
	poke    func()
	c       *Coordinator
	wg      sync.WaitGroup
	running map[string]context.CancelFunc
}

// set watches exactly the Consul nodes the last pass read checks of.
func (w *checkWatchers) set() {
	if w.c.opt.ConsulHealth == nil {
		return
	}
	w.c.mu.Lock()
	want := maps.Clone(w.c.checkNodes)
	w.c.mu.Unlock()
	if w.running == nil {
		w.running = map[string]context.CancelFunc{}
	}
	for node, cancel := range w.running {
		if !want[node] {
			cancel()
			delete(w.running, node)
		}
	}
	for node := range want {
		if _, ok := w.running[node]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(w.ctx)
		w.running[node] = cancel
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			watch.Loop{Query: func(ctx context.Context, idx uint64) (uint64, error) {
				q := (&consulapi.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
				_, meta, err := w.c.opt.ConsulHealth.Node(node, q)
				if err != nil {
					return 0, err
				}
				return meta.LastIndex, nil
			}, OnChange: func(uint64) { w.poke() }}.Run(ctx)
		}()
	}
}

// stop ends every watcher and waits for them.
func (w *checkWatchers) stop() {
	for _, cancel := range w.running {
		cancel()
	}
	w.wg.Wait()
}

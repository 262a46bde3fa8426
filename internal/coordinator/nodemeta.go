package coordinator

import (
	"context"
	"sync"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/store"
)

// MetaPublisher publishes each host's phase, need and last reboot as Nomad
// dynamic node metadata (*nodemeta.Publisher), beside the reconcile loop and
// only while this coordinator leads.
type MetaPublisher interface {
	Observe(map[string]nodemeta.Meta)
	Run(ctx context.Context, fence func(context.Context) error)
}

// startNodeMeta runs the publisher for this term; wg waits for it.
func (c *Coordinator) startNodeMeta(ctx context.Context, wg *sync.WaitGroup) {
	if c.opt.NodeMeta == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.opt.NodeMeta.Run(ctx, election.CheckLease)
	}()
}

// publishMeta hands the publisher the metadata wanted on every ready node of a
// host with a record, after this pass: its phase as stored, its agent's word on
// the need, and the end of its last reboot by rollboot. A node that is not ready
// is left out (its client would not answer); it gets its metadata once it is.
// Nothing is handed over while the plans and the hosts' views are the same as
// when it was last (sideoutputs.go).
func (c *Coordinator) publishMeta(s *snapshot) {
	if c.opt.NodeMeta == nil {
		return
	}
	views := c.viewCache.kept()
	c.mu.Lock()
	if c.plans != nil && !c.sideOutputs.metaDue(c.plansGen, views) {
		c.mu.Unlock()
		return
	}
	plans := c.plans
	want := map[string]nodemeta.Meta{}
	for name, hv := range s.hosts {
		if hv.node == nil || hv.node.Status != "ready" || hv.rec == nil {
			continue
		}
		p, ok := plans[name]
		if !ok {
			p = s.plans[name]
		}
		phase := p.Phase
		if phase == "" {
			phase = store.PhaseIdle
		}
		want[hv.node.ID] = nodemeta.Meta{Phase: phase, RebootRequired: hv.rec.RebootRequired, LastReboot: p.LastCompleted}
	}
	c.mu.Unlock()
	c.opt.NodeMeta.Observe(want)
}

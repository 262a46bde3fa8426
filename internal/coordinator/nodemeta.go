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
// The same metadata as last handed over is not handed over again
// (sideoutputs.go).
func (c *Coordinator) publishMeta(s *snapshot) {
	if c.opt.NodeMeta == nil {
		return
	}
	want := map[string]nodemeta.Meta{}
	c.mu.Lock()
	plans := c.plans
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
	if c.sideOutputs.metaDue(want) {
		c.opt.NodeMeta.Observe(want)
	}
}

package coordinator

import (
	"context"
	"sort"
	"sync"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// Notifier sends the notifications of the rollout (*notify.Notifier). It derives
// the events from the stored state the coordinator hands it after every pass, and
// runs only while this coordinator leads: a send is fenced by the leader's lease
// like a drain.
type Notifier interface {
	Observe(notify.State)
	Run(ctx context.Context, fence func(context.Context) error)
}

// startNotifier runs the notifier for this term; wg waits for it.
func (c *Coordinator) startNotifier(ctx context.Context, wg *sync.WaitGroup) {
	if c.opt.Notifier == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.opt.Notifier.Run(ctx, election.CheckLease)
	}()
}

// notifyPass hands the notifier the plans as stored (the cache holds only plans
// read or written) and the pause flag as read: before the pass's decisions (the
// plans another leader stored may be about to move on) and after them. After a
// conflict the cache is dropped: the next pass reads the plans again and hands
// them over then. The same plans and pause flag as last handed over are not
// handed over again (sideoutputs.go).
func (c *Coordinator) notifyPass(ctl store.Control) {
	if c.opt.Notifier == nil {
		return
	}
	pause := notify.Pause{Paused: ctl.Paused, At: ctl.PausedAt, Reason: ctl.PauseReason}
	c.mu.Lock()
	if c.plans == nil || !c.sideOutputs.notifyDue(c.plansGen, pause) {
		c.mu.Unlock()
		return
	}
	plans := make([]store.Plan, 0, len(c.plans))
	for _, p := range c.plans {
		plans = append(plans, p)
	}
	c.mu.Unlock()
	sort.Slice(plans, func(i, j int) bool { return plans[i].Host < plans[j].Host })
	c.opt.Notifier.Observe(notify.State{Plans: plans, Pause: pause})
}

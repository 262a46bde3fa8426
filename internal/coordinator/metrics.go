package coordinator

import (
	"time"

	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/store"
)

// The state metrics (package statemetrics, docs/metrics.md) are set from what
// each pass observed, handed over at its end (exportState), and from the
// cycles apply finishes and the drains it starts.

// exportState hands the state metrics what the pass that observed s saw.
func (c *Coordinator) exportState(s *snapshot) {
	in := stateInput(s, c.metrics.stateHosts)
	c.metrics.stateHosts = in.Hosts
	c.metrics.state.Export(in)
}

// stateInput is what the state metrics say of s, its hosts in buf's array
// (reused from pass to pass: Export keeps nothing of them).
func stateInput(s *snapshot, buf []statemetrics.Host) statemetrics.State {
	hosts := buf[:0]
	plans := newPlanCursor(s) // idle hosts' plans are not looked up
	for i, name := range s.names {
		hv := s.hostAt(i)
		h := statemetrics.Host{Name: name, Group: hv.group, Phase: store.PhaseIdle, HasRecord: hv.rec != nil}
		if hv.rec != nil {
			h.RebootRequired = hv.rec.RebootRequired
		}
		if plans.underWay(i) {
			p := s.plans[name]
			h.Phase, h.RequestedAt = hostPhase(p), p.RequestedAt
		}
		hosts = append(hosts, h)
	}
	return statemetrics.State{Now: s.now, Hosts: hosts, Groups: s.statuses, Paused: s.control.Paused, AgentsMissing: len(s.missing)}
}

// hostPhase is the phase of a host's plan, idle without one.
func hostPhase(p store.Plan) string {
	if p.Phase == "" {
		return store.PhaseIdle
	}
	return p.Phase
}

// slotFreed notes that a cycle of group ended at at, freeing a slot of the
// group (apply, from the plan writes side by side: under c.mu).
func (c *Coordinator) slotFreed(group string, at time.Time) {
	if at.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed == nil {
		c.freed = map[string]time.Time{}
	}
	c.freed[group] = at
}

// drainStarted observes the slot hand-off of a drain granted now to a host of
// group that asked at requested: from the later of its asking and the last
// freeing of a slot of the group (slotFreed). The first drain of a group after
// the coordinator starts leading is not observed (it did not see the slot
// free).
func (c *Coordinator) drainStarted(group string, requested, now time.Time) {
	c.mu.Lock()
	freed, ok := c.freed[group]
	delete(c.freed, group)
	c.mu.Unlock()
	if ok {
		c.metrics.state.HandOff(freed, requested, now)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

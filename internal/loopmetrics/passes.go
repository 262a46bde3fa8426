package loopmetrics

import (
	"sync"
	"time"
)

// Overrun is a reconcile pass that took longer than the resync interval.
type Overrun struct {
	Count int           // overruns since the coordinator started
	Last  time.Time     // when the last one ended
	Took  time.Duration // how long it took
}

// Passes observe one coordinator's passes on m: their duration, and those
// longer than the resync interval, overruns, counted since it started (m is
// shared by coordinators built on the same registry; Passes are not). Safe
// from any goroutine: callers read the overruns while the loop runs.
type Passes struct {
	m       *Metrics
	mu      sync.Mutex
	overrun Overrun
}

// NewPasses returns the passes of a coordinator, observed on m.
func NewPasses(m *Metrics) *Passes { return &Passes{m: m} }

// Observe records a pass that took took and ended at end, and reports how
// many overran so far when it overran resync, else 0.
func (p *Passes) Observe(took, resync time.Duration, end time.Time) int {
	p.m.Duration.Observe(took.Seconds())
	if took <= resync {
		return 0
	}
	p.m.Overruns.Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.overrun.Count++
	p.overrun.Last, p.overrun.Took = end, took
	return p.overrun.Count
}

// Overruns returns the passes that overran so far.
func (p *Passes) Overruns() Overrun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overrun
}

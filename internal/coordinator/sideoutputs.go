package coordinator

import (
	"github.com/rollboot/rollboot/internal/notify"
)

// After each pass the coordinator hands the stored state to the notifier and
// the node metadata publisher, which derive their work from all of it (every
// plan, every host). Over a cluster where nothing moved both got the same state
// again at every pass: at 5,000 hosts, two sorted copies of every plan and a map
// of every node's metadata per pass. They are handed over only when what they
// derive from changed: the plans (c.plansGen counts every write and load), the
// pause flag, and the hosts' views (a new kept map: viewcache.go).
type sideOutputs struct {
	// notifyGen and notifyPause: the plans' generation and the pause flag last
	// handed to the notifier (notified: at all, this term).
	notifyGen   uint64
	notifyPause notify.Pause
	notified    bool
	// metaGen and metaViews: the plans' generation and the kept views the
	// metadata last handed over was built from.
	metaGen   uint64
	metaViews map[string]*hostView
}

// notifyDue reports whether the notifier has not been handed these plans and
// this pause flag yet, and takes them as handed. Called with c.mu held.
func (h *sideOutputs) notifyDue(gen uint64, pause notify.Pause) bool {
	if h.notified && h.notifyGen == gen && h.notifyPause.Paused == pause.Paused &&
		h.notifyPause.At.Equal(pause.At) && h.notifyPause.Reason == pause.Reason {
		return false
	}
	h.notifyGen, h.notifyPause, h.notified = gen, pause, true
	return true
}

// metaDue reports whether the publisher has not been handed metadata built
// from these plans and views yet, and takes them as handed. Called with c.mu
// held.
func (h *sideOutputs) metaDue(gen uint64, views map[string]*hostView) bool {
	if views != nil && h.metaGen == gen && sameMap(h.metaViews, views) {
		return false
	}
	h.metaGen, h.metaViews = gen, views
	return true
}

// forget makes the next pass hand everything over (a new term: the notifier
// and the publisher start afresh).
func (h *sideOutputs) forget() { *h = sideOutputs{} }

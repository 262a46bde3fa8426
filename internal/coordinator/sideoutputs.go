package coordinator

import (
	"maps"

	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
)

// After each pass the coordinator hands the stored state to the notifier and
// the node metadata publisher, which derive their work from all of it (every
// plan, every host). Over a cluster where nothing moved both got the same state
// again at every pass: at 5,000 hosts, two sorted copies of every plan and a map
// of every node's metadata per pass. They are handed over only when what they
// derive from changed: the plans (c.plansGen counts every write and load) and
// the pause flag for the notifier; the metadata itself, compared with what was
// last handed, for the publisher.
type sideOutputs struct {
	// notifyGen and notifyPause: the plans' generation and the pause flag last
	// handed to the notifier (notified: at all, this term).
	notifyGen   uint64
	notifyPause notify.Pause
	notified    bool
	// meta: the metadata last handed to the publisher (metaHanded: at all,
	// this term).
	meta       map[string]nodemeta.Meta
	metaHanded bool
}

// notifyDue reports whether the notifier has not been handed these plans and
// this pause flag yet, and takes them as handed.
func (h *sideOutputs) notifyDue(gen uint64, pause notify.Pause) bool {
	if h.notified && h.notifyGen == gen && h.notifyPause.Paused == pause.Paused &&
		h.notifyPause.At.Equal(pause.At) && h.notifyPause.Reason == pause.Reason {
		return false
	}
	h.notifyGen, h.notifyPause, h.notified = gen, pause, true
	return true
}

// metaDue reports whether the publisher has not been handed this metadata
// yet, and takes it as handed.
func (h *sideOutputs) metaDue(want map[string]nodemeta.Meta) bool {
	if h.metaHanded && maps.EqualFunc(h.meta, want, sameMeta) {
		return false
	}
	h.meta, h.metaHanded = want, true
	return true
}

// sameMeta reports whether a and b say the same.
func sameMeta(a, b nodemeta.Meta) bool {
	return a.Phase == b.Phase && a.RebootRequired == b.RebootRequired && a.LastReboot.Equal(b.LastReboot)
}

// forget makes the next pass hand everything over (a new term: the notifier
// and the publisher start afresh).
func (h *sideOutputs) forget() { *h = sideOutputs{} }

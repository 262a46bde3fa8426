package sideoutput

import (
	"fmt"
	"maps"
	"strings"

	"github.com/rollboot/rollboot/internal/nodemeta"
	"github.com/rollboot/rollboot/internal/notify"
)

// handed is what was last handed to each side output in this term.
type handed struct {
	// notifyGen and notifyPause: the plans' generation and the pause flag last
	// handed to the notifier (notified: at all, this term).
	notifyGen   uint64
	notifyPause notify.Pause
	notified    bool
	// notifyHalts: the halts last handed to the notifier, as a key.
	notifyHalts string
	// notifyFreezes: the freezes in force last handed to the notifier, as a
	// key.
	notifyFreezes string
	// meta: the metadata last handed to the publisher (metaHanded: at all,
	// this term).
	meta       map[string]nodemeta.Meta
	metaHanded bool
	// silenceGen and silenceVersion: the plans' generation and the policy
	// version last handed to the silence keeper (silenced: at all, this
	// term).
	silenceGen     uint64
	silenceVersion int
	silenced       bool
}

// silenceDue reports whether the silence keeper has not been handed these
// plans under this policy yet, and takes them as handed.
func (h *handed) silenceDue(gen uint64, version int) bool {
	if h.silenced && h.silenceGen == gen && h.silenceVersion == version {
		return false
	}
	h.silenceGen, h.silenceVersion, h.silenced = gen, version, true
	return true
}

// notifyDue reports whether the notifier has not been handed these plans and
// this pause flag yet, and takes them as handed.
func (h *handed) notifyDue(gen uint64, pause notify.Pause) bool {
	if h.notified && h.notifyGen == gen && h.notifyPause.Paused == pause.Paused &&
		h.notifyPause.At.Equal(pause.At) && h.notifyPause.Reason == pause.Reason {
		return false
	}
	h.notifyGen, h.notifyPause, h.notified = gen, pause, true
	return true
}

// haltsDue reports whether the notifier has not been handed these halts yet,
// and takes them as handed.
func (h *handed) haltsDue(halts []notify.Halt) bool {
	var b strings.Builder
	for _, x := range halts {
		fmt.Fprintf(&b, "%s@%d;", x.Scope, x.Since.UnixNano())
	}
	if b.String() == h.notifyHalts {
		return false
	}
	h.notifyHalts = b.String()
	return true
}

// freezesDue reports whether the notifier has not been handed these freezes
// in force yet, and takes them as handed.
func (h *handed) freezesDue(fs []notify.Freeze) bool {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s@%d-%d:%s;", f.Name, f.Start.UnixNano(), f.End.UnixNano(), strings.Join(f.Groups, ","))
	}
	if b.String() == h.notifyFreezes {
		return false
	}
	h.notifyFreezes = b.String()
	return true
}

// metaDue reports whether the publisher has not been handed this metadata
// yet, and takes it as handed.
func (h *handed) metaDue(want map[string]nodemeta.Meta) bool {
	if h.metaHanded && maps.EqualFunc(h.meta, want, sameMeta) {
		return false
	}
	h.meta, h.metaHanded = want, true
	return true
}

// sameMeta reports whether a and b say the same.
func sameMeta(a, b nodemeta.Meta) bool {
	return a.Phase == b.Phase && a.RebootRequired == b.RebootRequired && a.LastReboot.Equal(b.LastReboot) &&
		a.Steering == b.Steering && a.Next == b.Next && a.Cordoning == b.Cordoning && a.Cordoned == b.Cordoned && a.Operator == b.Operator
}

package phase

import (
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// UptimeNeed is the host's uptime need: it has been up longer than its
// group's max_uptime (with its jitter, policy.UptimeDue) since the boot time
// its record gives. The need is the host's own claim, and can reboot only
// that host: its agent refuses a grant for an uptime that is not its own
// (store.Plan.UptimeBootedAt). A record of a boot the host has left
// (GoneBootID) makes none, and a cancel suppresses a need due at or before it.
func UptimeNeed(in Input) (due, booted time.Time, ok bool) {
	if in.Host == nil || in.Plan.GoneBootID != "" && in.Host.BootID == in.Plan.GoneBootID {
		return time.Time{}, time.Time{}, false
	}
	due, ok = policy.UptimeDue(in.Plan.Host, in.Host.BootedAt, in.MaxUptime)
	if !ok || in.Now.Before(due) || !in.CancelAt.IsZero() && !due.After(in.CancelAt) {
		return time.Time{}, time.Time{}, false
	}
	return due, in.Host.BootedAt, true
}

// needOf is the host's need: its detectors' or an operator's (Need), else,
// with the lowest priority, its uptime's.
func needOf(in Input) needed {
	var n needed
	if n.at, n.reason, n.ok = Need(in); n.ok {
		return n
	}
	if due, booted, ok := UptimeNeed(in); ok {
		return needed{at: due, reason: policy.UptimeReason(in.Plan.Host, in.MaxUptime), ok: true, uptimeBoot: booted}
	}
	return n
}

// renewNeed keeps a pending plan's reason that of the need it waits for when
// the kind of need changed: a package need that came while an uptime need
// waited overtakes it (the reason shown is the package one), and an uptime
// need that outlived the package need it waited with now stands alone. The
// plan keeps its place in the queue (RequestedAt).
func renewNeed(d Decision, n needed) Decision {
	if !n.ok || n.uptimeBoot.Equal(d.Plan.UptimeBootedAt) {
		return d
	}
	d.Plan.Reason, d.Plan.UptimeBootedAt = n.reason, n.uptimeBoot
	d.Write = true
	return d
}

package policy

import (
	"hash/fnv"
	"strconv"
	"time"
)

// UptimeJitterShare is the share of a group's max_uptime over which its hosts'
// uptime needs are spread: a fleet booted together does not ask at once.
const UptimeJitterShare = 10 // percent

// UptimeJitter is host's deterministic share of the spread: a hash of its name
// placed in [0, limit × UptimeJitterShare %). The same host always gets the same
// one, so a coordinator fail-over does not move its turn.
func UptimeJitter(host string, limit time.Duration) time.Duration {
	spread := limit / 100 * UptimeJitterShare
	if spread <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(host))
	return time.Duration(h.Sum64() % uint64(spread))
}

// UptimeDue is when a host booted at booted has been up longer than limit (its
// jitter added): from then on it needs a reboot. ok is false when limit is 0
// (no max_uptime) or the boot time is not known.
func UptimeDue(host string, booted time.Time, limit time.Duration) (due time.Time, ok bool) {
	if limit <= 0 || booted.IsZero() {
		return time.Time{}, false
	}
	return booted.Add(limit + UptimeJitter(host, limit)), true
}

// UptimeReason says why a host whose uptime need fell due reboots: its uptime
// when the need fell due against limit, in its largest whole unit ("uptime
// 31.4d > 30d"). It is the same at every pass, so the need's reason does not
// change while it waits.
func UptimeReason(host string, limit time.Duration) string {
	return "uptime " + inUnit(limit+UptimeJitter(host, limit), limit) + " > " + inUnit(limit, limit)
}

// inUnit writes d in the largest of days, hours, minutes and seconds that
// ref holds at least once, with one decimal when d is not whole in it.
func inUnit(d, ref time.Duration) string {
	unit, suffix := time.Second, "s"
	for _, u := range []struct {
		d      time.Duration
		suffix string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if ref >= u.d {
			unit, suffix = u.d, u.suffix
			break
		}
	}
	v := float64(d) / float64(unit)
	return strconv.FormatFloat(float64(int64(v*10))/10, 'f', -1, 64) + suffix
}

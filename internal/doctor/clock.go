package doctor

import (
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// DefaultClockTolerance is the clock skew checkClock lets pass.
const DefaultClockTolerance = 5 * time.Second

const clockFix = "keep the clocks in sync with NTP (`timedatectl set-ntp true`; `chronyc tracking` shows the offset)"

// skew bounds the local clock's offset from the server's from below: the
// server's time lies in [Date, Date+1s) (the header has whole seconds), the
// local time of the answer in [Sent, Received]. Positive: the local clock is
// ahead.
func skew(c ClockInput) time.Duration {
	switch {
	case c.Date.After(c.Received):
		return c.Received.Sub(c.Date) // behind
	case c.Sent.After(c.Date.Add(time.Second)):
		return c.Sent.Sub(c.Date.Add(time.Second))
	}
	return 0
}

// checkClock: the local clock agrees with Nomad's server (the Date header of
// its answers), and no host record was written by a clock ahead of it (a
// time of need in the future).
func checkClock(c ClockInput, hosts HostsInput, tol time.Duration) []Finding {
	if tol <= 0 {
		tol = DefaultClockTolerance
	}
	var out []Finding
	server := c.Received // the best guess of the server's time without a Date
	if !c.Date.IsZero() {
		s := skew(c)
		server = c.Received.Add(-s)
		if s > tol || -s > tol {
			way := "ahead of"
			if s < 0 {
				way, s = "behind", -s
			}
			out = append(out, Finding{Check: CheckClock, Severity: Warning, Subject: "local",
				What: fmt.Sprintf("this machine's clock is at least %s %s the Nomad server's: maintenance windows are judged by the coordinator's clock", s.Round(time.Second), way),
				Fix:  clockFix})
		}
	}
	for _, r := range hosts.Records {
		if ahead := r.RequestedAt.Sub(server); !r.RequestedAt.IsZero() && !server.IsZero() && ahead > tol {
			out = append(out, hostAhead(r, ahead))
		}
	}
	if len(out) == 0 && !c.Date.IsZero() {
		out = append(out, Finding{Check: CheckClock, What: fmt.Sprintf("the clocks agree with Nomad's within %s", tol)})
	}
	return out
}

func hostAhead(r store.HostRecord, ahead time.Duration) Finding {
	return Finding{Check: CheckClock, Severity: Warning, Subject: r.Host,
		What: fmt.Sprintf("host %s's clock runs at least %s ahead: its record says it needed a reboot since a time still to come", r.Host, ahead.Round(time.Second)),
		Fix:  clockFix + " on " + r.Host}
}

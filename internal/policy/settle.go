package policy

import "time"

// SettleUntil returns when group g may start its next host, given that the last
// of its hosts came back (its cycle ended) at lastBack: lastBack + g.Settle, and
// whether that is still ahead of now. A group without a settle time, or none of
// whose hosts has come back yet, never settles.
func SettleUntil(g Group, lastBack, now time.Time) (time.Time, bool) {
	if g.Settle <= 0 || lastBack.IsZero() {
		return time.Time{}, false
	}
	until := lastBack.Add(g.Settle)
	return until, now.Before(until)
}

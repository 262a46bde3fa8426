package notify

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Ledger records which events were sent: for each host, the events of its
// current grant and the end of the last cycle notified, and the last pause. It
// is bounded by the number of hosts, whatever the history.
type Ledger struct {
	Hosts map[string]HostSent
	Pause PauseSent
	// ModifyIndex of the ledger variable (0: it does not exist yet).
	ModifyIndex uint64
}

// HostSent is what was sent of one host's events.
type HostSent struct {
	Grant string // the grant whose events Kinds are
	Kinds []Kind
	Back  time.Time // LastCompleted of the last back_in_service sent
}

// PauseSent is what was sent of the last pause.
type PauseSent struct {
	At      time.Time // the pause's time (control's PausedAt)
	Paused  bool      // paused was sent for it
	Resumed bool      // resumed was sent for it
}

// Sent reports whether the ledger records e as sent.
func (l Ledger) Sent(e Event) bool {
	switch e.Kind {
	case Paused:
		return l.Pause.Paused && l.Pause.At.Equal(e.At)
	case Resumed:
		return l.Pause.Resumed && l.Pause.At.Equal(e.At)
	case BackInService:
		h, ok := l.Hosts[e.Host]
		return ok && !e.At.After(h.Back)
	}
	h, ok := l.Hosts[e.Host]
	return ok && h.Grant == e.Grant && slices.Contains(h.Kinds, e.Kind)
}

// Mark records e as sent.
func (l *Ledger) Mark(e Event) {
	switch e.Kind {
	case Paused:
		l.Pause = PauseSent{At: e.At, Paused: true}
		return
	case Resumed:
		l.Pause = PauseSent{At: e.At, Paused: true, Resumed: true}
		return
	}
	if l.Hosts == nil {
		l.Hosts = map[string]HostSent{}
	}
	h := l.Hosts[e.Host]
	if e.Kind == BackInService {
		if e.At.After(h.Back) {
			h.Back = e.At
		}
		l.Hosts[e.Host] = h
		return
	}
	if h.Grant != e.Grant {
		h.Grant, h.Kinds = e.Grant, nil
	}
	if !slices.Contains(h.Kinds, e.Kind) {
		h.Kinds = append(h.Kinds, e.Kind)
	}
	l.Hosts[e.Host] = h
}

// Prune forgets the hosts that have no plan any more.
func (l *Ledger) Prune(plans []store.Plan) {
	keep := map[string]bool{}
	for _, p := range plans {
		keep[p.Host] = true
	}
	for h := range l.Hosts {
		if !keep[h] {
			delete(l.Hosts, h)
		}
	}
}

// Baseline returns a ledger that records every event the state implies as
// sent: the first leader with notifications configured starts from it, so
// that it notifies what happens from then on, not the whole past.
func Baseline(plans []store.Plan, pause Pause) Ledger {
	var l Ledger
	for _, e := range Derive(plans, pause, l) {
		l.Mark(e)
	}
	return l
}

// ledgerVersion is the schema of the ledger variable.
const ledgerVersion = "1"

// Items encodes the ledger as the items of its variable: "version", "pause"
// (unix nanoseconds, then "p" paused sent and "r" resumed sent) and one item
// "host/<host>" per host: grant, the kinds sent joined by "+", and the end of
// the last cycle notified in unix nanoseconds, separated by ",".
func (l Ledger) Items() map[string]string {
	items := map[string]string{"version": ledgerVersion}
	if !l.Pause.At.IsZero() || l.Pause.Paused {
		flags := ""
		if l.Pause.Paused {
			flags += "p"
		}
		if l.Pause.Resumed {
			flags += "r"
		}
		items["pause"] = nanos(l.Pause.At) + "," + flags
	}
	for host, h := range l.Hosts {
		kinds := make([]string, len(h.Kinds))
		for i, k := range h.Kinds {
			kinds[i] = string(k)
		}
		sort.Strings(kinds)
		items["host/"+host] = h.Grant + "," + strings.Join(kinds, "+") + "," + nanos(h.Back)
	}
	return items
}

// DecodeLedger reads the items of the ledger variable. An entry that cannot be
// read is left out and named in problems: its events may be sent again (at
// least once). A ledger of a newer version is refused.
func DecodeLedger(items map[string]string, modifyIndex uint64) (l Ledger, problems []string, err error) {
	l.ModifyIndex = modifyIndex
	if v := items["version"]; v != ledgerVersion {
		return l, nil, fmt.Errorf("notification ledger: version %q: this rollboot reads version %s", v, ledgerVersion)
	}
	if s, ok := items["pause"]; ok {
		at, flags, ok := strings.Cut(s, ",")
		t, err := fromNanos(at)
		if !ok || err != nil || strings.Trim(flags, "pr") != "" {
			problems = append(problems, "pause: malformed")
		} else {
			l.Pause = PauseSent{At: t, Paused: strings.Contains(flags, "p"), Resumed: strings.Contains(flags, "r")}
		}
	}
	for k, v := range items {
		host, ok := strings.CutPrefix(k, "host/")
		if !ok {
			continue
		}
		parts := strings.Split(v, ",")
		back, err := fromNanos(parts[len(parts)-1])
		if len(parts) != 3 || err != nil {
			problems = append(problems, k+": malformed")
			continue
		}
		h := HostSent{Grant: parts[0], Back: back}
		for _, kind := range strings.Split(parts[1], "+") {
			if kind == "" {
				continue
			}
			if !ValidKind(kind) {
				problems = append(problems, k+": unknown event "+strconv.Quote(kind))
				continue
			}
			h.Kinds = append(h.Kinds, Kind(kind))
		}
		if l.Hosts == nil {
			l.Hosts = map[string]HostSent{}
		}
		l.Hosts[host] = h
	}
	sort.Strings(problems)
	return l, problems, nil
}

func nanos(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func fromNanos(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, n).UTC(), nil
}

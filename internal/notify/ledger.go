package notify

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Ledger records which events were sent: for each host, the events of its
// current grant and the end of the last cycle notified, and the last pause. It
// is bounded by the number of hosts, whatever the history. It is a value: the
// notifier reads and writes its variables (ledgerstore.go).
type Ledger struct {
	Hosts map[string]HostSent
	Pause PauseSent
	// Halts: the time of the last halt notified, by scope (kept in the pause
	// part, item "halts").
	Halts map[string]time.Time
	// Freezes: the last occurrence of each freeze notified, by name (kept in
	// the pause part, item "freezes"); an ended one is forgotten once the
	// state no longer holds it (Prune).
	Freezes map[string]FreezeSent
}

// FreezeSent is what was sent of a freeze's last occurrence.
type FreezeSent struct {
	Start  time.Time // the occurrence's start: frozen was sent for it
	Until  time.Time // its end, as frozen said it
	Groups string    // the groups it held, as frozen said them
	Ended  bool      // freeze_ended was sent for it
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
	case Halted:
		at, ok := l.Halts[e.Group]
		return ok && !e.At.After(at)
	case Frozen:
		f, ok := l.Freezes[e.Freeze]
		return ok && !e.At.After(f.Start)
	case FreezeEnded:
		f, ok := l.Freezes[e.Freeze]
		return ok && f.Ended && f.Until.Equal(e.Until)
	case BackInService:
		h, ok := l.Hosts[e.Host]
		return ok && !e.At.After(h.Back)
	}
	h, ok := l.Hosts[e.Host]
	return ok && h.Grant == e.ledgerGrant() && slices.Contains(h.Kinds, e.Kind)
}

// ledgerGrant is what the ledger keys e by: its grant, or for
// awaiting_approval (which has none yet) the time the host began to await.
func (e Event) ledgerGrant() string {
	if e.Kind == AwaitingApproval && !e.At.IsZero() {
		return "approval@" + nanos(e.At)
	}
	return e.Grant
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
	case Halted:
		if l.Halts == nil {
			l.Halts = map[string]time.Time{}
		}
		l.Halts[e.Group] = e.At
		return
	case Frozen, FreezeEnded:
		l.markFreeze(e)
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
	if g := e.ledgerGrant(); h.Grant != g {
		h.Grant, h.Kinds = g, nil
	}
	if !slices.Contains(h.Kinds, e.Kind) {
		h.Kinds = append(h.Kinds, e.Kind)
	}
	l.Hosts[e.Host] = h
}

// markFreeze records a frozen or freeze_ended as sent. frozen of an earlier
// occurrence than the one recorded changes nothing.
func (l *Ledger) markFreeze(e Event) {
	if l.Freezes == nil {
		l.Freezes = map[string]FreezeSent{}
	}
	f, ok := l.Freezes[e.Freeze]
	switch {
	case e.Kind == Frozen && (!ok || e.At.After(f.Start)):
		l.Freezes[e.Freeze] = FreezeSent{Start: e.At, Until: e.Until, Groups: e.Group}
	case e.Kind == FreezeEnded && ok && f.Until.Equal(e.Until):
		f.Ended = true
		l.Freezes[e.Freeze] = f
	}
}

// PruneFreezes forgets the freezes whose end was notified and that are not in
// force in fs: the ledger holds no more freezes than those in force and
// those still to be notified ended.
func (l *Ledger) PruneFreezes(fs []Freeze) {
	for name, f := range l.Freezes {
		if f.Ended && !slices.ContainsFunc(fs, func(x Freeze) bool { return x.Name == name }) {
			delete(l.Freezes, name)
		}
	}
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

// The ledger is stored in parts, each a variable <prefix>/notify/<part>: the
// hosts spread over LedgerShards shards by a hash of their name, and the pause.
// One variable held them all in version 1 (<prefix>/notify, LegacyPart), and
// Nomad's 64 KiB limit on a variable's items refused its writes from about a
// thousand hosts on: each shard holds a sixty-fourth of the hosts, so a write
// carries only the hosts of the shard that changed, and 64 KiB per shard is
// room for about 30,000 hosts with names of 30 characters.
const (
	// LedgerShards is how many variables the hosts are spread over. It is
	// part of the format: a host's shard must not change within a version.
	LedgerShards = 64
	// PausePart holds the version and the last pause notified. It is written
	// after the shards, so its existence says the ledger exists.
	PausePart = "pause"
	// LegacyPart is the single variable of version 1: read as the starting
	// point of an upgrade, and deleted once the parts record it.
	LegacyPart = ""
)

// ledgerVersion is the schema of the ledger's parts; legacyVersion that of the
// single variable it replaces.
const (
	ledgerVersion = "2"
	legacyVersion = "1"
)

// ShardOf returns the name of the part that holds host: its FNV-1a hash modulo
// LedgerShards, in decimal.
func ShardOf(host string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(host))
	return strconv.Itoa(int(h.Sum32() % LedgerShards))
}

// Parts encodes the ledger as the items of its variables, by part name: the
// pause part always ("version", and "pause": unix nanoseconds, then "p"
// paused sent and "r" resumed sent; "halts", and "freezes": JSON objects by
// scope and by freeze name), and each shard that holds a host
// ("version", and one item "host/<host>" per host: grant, the kinds sent
// joined by "+", and the end of the last cycle notified in unix nanoseconds,
// separated by ","). A shard left out holds no host.
func (l Ledger) Parts() map[string]map[string]string {
	head := map[string]string{"version": ledgerVersion}
	if !l.Pause.At.IsZero() || l.Pause.Paused {
		flags := ""
		if l.Pause.Paused {
			flags += "p"
		}
		if l.Pause.Resumed {
			flags += "r"
		}
		head["pause"] = nanos(l.Pause.At) + "," + flags
	}
	if len(l.Halts) > 0 {
		halts := map[string]int64{}
		for scope, at := range l.Halts {
			halts[scope] = at.UnixNano()
		}
		b, _ := json.Marshal(halts) // a map of strings to numbers always encodes
		head["halts"] = string(b)
	}
	if len(l.Freezes) > 0 {
		freezes := map[string]freezeItem{}
		for name, f := range l.Freezes {
			freezes[name] = freezeItem{Start: f.Start.UnixNano(), Until: f.Until.UnixNano(), Groups: f.Groups, Ended: f.Ended}
		}
		b, _ := json.Marshal(freezes) // strings, numbers and booleans always encode
		head["freezes"] = string(b)
	}
	parts := map[string]map[string]string{PausePart: head}
	for host, h := range l.Hosts {
		kinds := make([]string, len(h.Kinds))
		for i, k := range h.Kinds {
			kinds[i] = string(k)
		}
		sort.Strings(kinds)
		shard := ShardOf(host)
		if parts[shard] == nil {
			parts[shard] = map[string]string{"version": ledgerVersion}
		}
		parts[shard]["host/"+host] = h.Grant + "," + strings.Join(kinds, "+") + "," + nanos(h.Back)
	}
	return parts
}

// DecodeLedger reads the items of the ledger's parts, by part name. An entry
// that cannot be read is left out and named in problems: its events may be sent
// again (at least once). A part of a newer version is refused. The single
// variable of version 1 (LegacyPart), when given, is put on what the parts
// record (merge): it is the starting point of an upgrade, or was written since
// by a coordinator of an older version.
func DecodeLedger(parts map[string]map[string]string) (l Ledger, problems []string, err error) {
	names := make([]string, 0, len(parts))
	for name := range parts {
		if name != LegacyPart {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if v := parts[name]["version"]; v != ledgerVersion {
			return Ledger{}, nil, fmt.Errorf("notification ledger part %q: version %q: this rollboot reads version %s", name, v, ledgerVersion)
		}
		problems = append(problems, decodeEntries(parts[name], &l)...)
	}
	if items, ok := parts[LegacyPart]; ok {
		if v := items["version"]; v != legacyVersion {
			return Ledger{}, nil, fmt.Errorf("notification ledger of one variable: version %q: this rollboot reads version %s", v, legacyVersion)
		}
		var old Ledger
		problems = append(problems, decodeEntries(items, &old)...)
		merge(&l, old)
	}
	sort.Strings(problems)
	return l, problems, nil
}

// decodeEntries puts the pause and host entries of one part's items on l.
func decodeEntries(items map[string]string, l *Ledger) (problems []string) {
	if s, ok := items["pause"]; ok {
		at, flags, ok := strings.Cut(s, ",")
		t, err := fromNanos(at)
		if !ok || err != nil || strings.Trim(flags, "pr") != "" {
			problems = append(problems, "pause: malformed")
		} else {
			l.Pause = PauseSent{At: t, Paused: strings.Contains(flags, "p"), Resumed: strings.Contains(flags, "r")}
		}
	}
	if s, ok := items["halts"]; ok {
		var halts map[string]int64
		if err := json.Unmarshal([]byte(s), &halts); err != nil {
			problems = append(problems, "halts: malformed")
		}
		for scope, n := range halts {
			if l.Halts == nil {
				l.Halts = map[string]time.Time{}
			}
			l.Halts[scope] = time.Unix(0, n).UTC()
		}
	}
	if s, ok := items["freezes"]; ok {
		problems = append(problems, decodeFreezes(s, l)...)
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
	return problems
}

// freezeItem is a freeze's entry in the pause part's item "freezes" (a JSON
// object by freeze name): the times in unix nanoseconds.
type freezeItem struct {
	Start  int64  `json:"start"`
	Until  int64  `json:"until"`
	Groups string `json:"groups,omitempty"`
	Ended  bool   `json:"ended,omitempty"`
}

// decodeFreezes puts the freezes of the item "freezes" on l. A ledger written
// before freezes were notified has no such item: nothing was sent of them.
func decodeFreezes(s string, l *Ledger) (problems []string) {
	var items map[string]freezeItem
	if err := json.Unmarshal([]byte(s), &items); err != nil {
		return []string{"freezes: malformed"}
	}
	for name, f := range items {
		if l.Freezes == nil {
			l.Freezes = map[string]FreezeSent{}
		}
		l.Freezes[name] = FreezeSent{Start: time.Unix(0, f.Start).UTC(), Until: time.Unix(0, f.Until).UTC(), Groups: f.Groups, Ended: f.Ended}
	}
	return nil
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

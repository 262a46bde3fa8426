package policy

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Slots returns how many hosts of group g, which has groupSize nodes, rollboot
// may have out of service at once: g.Concurrency, further limited by
// MaxUnavailable when g.MaxUnavailablePct is set.
func Slots(g Group, groupSize int) int {
	n := max(g.Concurrency, 0)
	if limit, ok := MaxUnavailable(g, groupSize); ok {
		n = min(n, limit)
	}
	return n
}

// MaxUnavailable returns how many of the group's groupSize nodes may be
// unavailable at once, for any reason, and whether g.MaxUnavailablePct is
// set at all. The limit is floor(groupSize × pct / 100), but at least 1 when
// the group has nodes, so that a small group can still be rebooted one host
// at a time (25% of 3 nodes allows 1). An empty group allows 0.
func MaxUnavailable(g Group, groupSize int) (limit int, ok bool) {
	if g.MaxUnavailablePct <= 0 {
		return 0, false
	}
	if groupSize <= 0 {
		return 0, true
	}
	pct := min(g.MaxUnavailablePct, 100)
	return max(groupSize*pct/100, 1), true
}

// GroupStatus is what the coordinator observes about one group when it asks
// which pending hosts may start.
type GroupStatus struct {
	// Group is the group's configuration; Group.Name is the key that
	// Request.Group refers to.
	Group Group
	// Size is the number of nodes in the group.
	Size int
	// Active is the number of the group's hosts that rollboot has out of
	// service: in the draining, drained, rebooting, rejoining or stuck
	// phase. They count against Slots and against MaxUnavailable.
	Active int
	// Unavailable is the number of the group's nodes that are unavailable
	// for other reasons: down, or ineligible without rollboot having made
	// them so. They count against MaxUnavailable only. Do not count a host
	// here that is already counted in Active.
	Unavailable int
	// Hold, when not empty, admits no host of the group and is given as the
	// reason: a closed maintenance window, a blocker, a pause.
	Hold string
}

// Request is a host waiting in the pending phase.
type Request struct {
	// Host is the host's name. It breaks ties between equal RequestedAt.
	Host string
	// Group is the name of the host's group (see Assign).
	Group string
	// RequestedAt is when the host asked for a reboot; earlier goes first.
	RequestedAt time.Time
}

// Waiting is a pending host that may not start now, and why.
type Waiting struct {
	Request
	// Reason says why, in words for an operator.
	Reason string
	// ForSlot: the host waits only for a slot of its group (the group is full,
	// its max_unavailable is reached, or a host ahead of it waits for that), not
	// for a window or a hold. Reason then names the host ahead and counts that
	// change at every hand-off.
	ForSlot bool
}

// Admission is the result of Admit.
type Admission struct {
	// Admitted are the hosts that may start draining now, in queue order.
	Admitted []Request
	// Waiting are the other pending hosts, in queue order.
	Waiting []Waiting
	// Refused are the hosts a slot was offered to and AdmitWith's check
	// refused, in queue order; the caller knows why.
	Refused []Request
}

// fifoCompare orders requests first come, first served, with the host name as
// tiebreak.
func fifoCompare(a, b Request) int {
	if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Host, b.Host)
}

// InQueueOrder returns a copy of queue in the order Admit serves it. A caller
// that admits several times from one queue sorts it once: Admit takes a queue
// already in that order as it is, without copying it.
func InQueueOrder(queue []Request) []Request {
	q := slices.Clone(queue)
	slices.SortStableFunc(q, fifoCompare)
	return q
}

// Admit decides which pending hosts may start now.
//
// Within a group, hosts are served first come, first served (RequestedAt,
// then Host), and strictly so: once a host of a group cannot start, no later
// host of that group starts either, while other groups go on. A group admits
// hosts while
//
//	Active + admitted <= Slots(Group, Size)
//
// and, when MaxUnavailablePct is set,
//
//	Active + Unavailable + admitted <= MaxUnavailable(Group, Size).
//
// A host whose group is not in groups waits; if groups names a group twice,
// the first counts. When a host appears several times in queue, its first
// request (in FIFO order) counts and the others wait.
//
// Admit does not modify its arguments.
func Admit(groups []GroupStatus, queue []Request) Admission { return AdmitWith(groups, queue, nil) }

// AdmitWith is Admit with a last check on each host a slot is offered to, in
// queue order: a host accept refuses is listed in Refused, takes no slot, and
// does not stop the hosts behind it, so the slot goes to the next host in line
// in the same round. A host held for a reason of its own (its servers' quorum,
// room for its allocations) would otherwise keep its group's slots from everyone
// behind it for as long as it is held. accept sees the hosts in the order they
// are admitted, so it may count what it accepted before. A nil accept accepts
// every host.
func AdmitWith(groups []GroupStatus, queue []Request, accept func(Request) bool) Admission {
	return AdmitInOrder(groups, InQueueOrder(queue), accept)
}

// AdmitInOrder is AdmitWith serving the hosts in the order queue gives them,
// not first come, first served: a caller that keeps a host's place in its
// group's line for a reason of its own (a host awaiting its approval) orders
// the queue itself.
func AdmitInOrder(groups []GroupStatus, queue []Request, accept func(Request) bool) Admission {
	byName := make(map[string]GroupStatus, len(groups))
	for _, g := range groups {
		if _, dup := byName[g.Group.Name]; !dup {
			byName[g.Group.Name] = g
		}
	}
	q := queue // read only

	admitted := map[string]int{} // per group
	blocked := map[string]Waiting{}
	seen := make(map[string]bool, len(q))
	var out Admission
	wait := func(r Request, reason string, forSlot bool) {
		out.Waiting = append(out.Waiting, Waiting{Request: r, Reason: reason, ForSlot: forSlot})
	}
	for _, r := range q {
		if seen[r.Host] {
			wait(r, "duplicate request for this host", false)
			continue
		}
		seen[r.Host] = true
		if b, ok := blocked[r.Group]; ok {
			wait(r, b.Reason, b.ForSlot)
			continue
		}
		g, ok := byName[r.Group]
		if !ok {
			wait(r, fmt.Sprintf("unknown group %q", r.Group), false)
			continue
		}
		if reason := g.full(admitted[r.Group]); reason != "" {
			forSlot := g.Hold == ""
			wait(r, reason, forSlot)
			blocked[r.Group] = Waiting{Reason: fmt.Sprintf("behind %s in group %q (%s)", r.Host, r.Group, reason), ForSlot: forSlot}
			continue
		}
		if accept != nil && !accept(r) {
			out.Refused = append(out.Refused, r)
			continue
		}
		admitted[r.Group]++
		out.Admitted = append(out.Admitted, r)
	}
	return out
}

// SlotFree reports whether one more host of the group could start, the
// group's hold aside (a hold an urgent request skips, or one that lifts): a
// slot is free and the group's unavailability allows one more.
func (g GroupStatus) SlotFree() bool {
	g.Hold = ""
	return g.full(0) == ""
}

// Free is how many more of the group's hosts could start now: its free slots,
// as its unavailability allows; none while it is held.
func (g GroupStatus) Free() int {
	n := 0
	for g.full(n) == "" {
		n++
	}
	return n
}

// full returns why one more host cannot start, given n already admitted in
// this round, or "" if it can.
func (g GroupStatus) full(n int) string {
	if g.Hold != "" {
		return g.Hold
	}
	slots := Slots(g.Group, g.Size)
	if g.Active+n >= slots {
		return fmt.Sprintf("group %q is full: %d of %d slots in use", g.Group.Name, g.Active+n, slots)
	}
	if limit, ok := MaxUnavailable(g.Group, g.Size); ok {
		down := g.Active + g.Unavailable + n
		if down >= limit {
			return fmt.Sprintf("group %q has %d of %d nodes unavailable, max_unavailable %d%% allows %d",
				g.Group.Name, down, g.Size, g.Group.MaxUnavailablePct, limit)
		}
	}
	return ""
}

var percentRE = regexp.MustCompile(`^([0-9]+)%$`)

// ParsePercent parses a group's max_unavailable: "" is unset (0), else a
// whole number of percent from "1%" to "100%".
func ParsePercent(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	m := percentRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf(`invalid percentage %q: use a whole number of percent from "1%%" to "100%%", or "" for no limit`, s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf(`percentage %q out of range: use "1%%" to "100%%", or "" for no limit`, s)
	}
	return n, nil
}

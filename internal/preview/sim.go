package preview

import (
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// sim serves one group's queue in time, as the coordinator would:
//   - first come, first served, strictly: a host starts no earlier than the one
//     before it, and a host whose backoff ends before the next start and that
//     asked earlier goes first;
//   - no more hosts out at once than the group's capacity: each host out comes
//     back one cycle (median drain + reboot + rejoin) after it started;
//   - no start within the group's settle time after a host came back;
//   - a drain starts only when the group's window is open and stays open for
//     the drain deadline and no freeze is in force or begins before it
//     (policy.Calendar.CanStartDrain, the rule admission
//     applies); otherwise the host waits for the next opening that leaves that
//     much time. The reboot and rejoin may run past the window's end, as they
//     do in the coordinator;
//   - an urgent request (`rollboot request -urgent`) skips the window and the
//     freezes: it starts as soon as a slot and the settle time allow, ahead
//     of the hosts that wait for the window, and in its turn when the window
//     is open;
//   - a host that runs a server goes out only while no other host of its
//     server clusters is out, in any group (the coordinator's server gate);
//     while it waits for that, the next host in line takes the slot, as
//     admission gives it.
//
// The groups' queues are served together (serve), so that the servers of one
// cluster in different groups go out one after the other. Nothing else is
// foreseen: nodes that are unavailable stay so, gates stay open, no new need
// appears.
type sim struct {
	now      time.Time
	cycle    time.Duration
	capacity int
	settle   time.Duration
	sched    policy.Calendar
	deadline time.Duration
	outs     []time.Time // when each host out comes back; zero: not known (stuck)
	lastBack time.Time   // when a host of the group last came back, from history
	// notBefore: no host starts before it (a pause that ends by itself).
	notBefore time.Time

	// The queue being served (begin), in FIFO order, and the estimates of its
	// hosts, in the same order.
	queue []ObservedHost
	hosts []Host
	ready []time.Time // when each host's backoff ends
	done  []bool
	left  int
	t     time.Time // no host starts before it
}

// begin sets the queue of group to serve (FIFO order), and its hosts to
// estimate (the same order).
func (s *sim) begin(queue []ObservedHost, group string) {
	s.queue, s.t, s.left = queue, later(s.now, s.notBefore), len(queue)
	s.hosts = make([]Host, len(queue))
	s.ready, s.done = make([]time.Time, len(queue)), make([]bool, len(queue))
	for i, ph := range queue {
		s.hosts[i] = hostOf(ph, group)
		s.ready[i] = s.now
		if ph.Plan.NextTry.After(s.now) {
			s.ready[i] = ph.Plan.NextTry
		}
		s.ready[i] = later(s.ready[i], ph.NotBefore) // a wave's soak (ObservedHost)
	}
}

// candidate returns the host the group starts next and when, with the server
// clusters out as out says; i < 0, with why, when none of the hosts left can
// start. It only moves the time no host starts before. An urgent host that may
// start before the line's next, its calendar skipped, goes first.
func (s *sim) candidate(out serversOut) (i int, start time.Time, why string) {
	j, urgentStart := s.urgent(out)
	i, start, why = s.inLine(out)
	if j >= 0 && (i < 0 || urgentStart.Before(start)) {
		return j, urgentStart, ""
	}
	return i, start, why
}

// urgent returns the first urgent host in FIFO order that may start soonest
// from s.t with its group's calendar skipped, and when; -1 when none may.
func (s *sim) urgent(out serversOut) (int, time.Time) {
	t := s.t
	for range 1000 {
		var at time.Time
		found := false
		for j := range s.queue {
			if s.done[j] || !s.queue[j].Urgent {
				continue
			}
			if r, ok := s.readyAt(j, t, out); ok && (!found || r.Before(at)) {
				at, found = r, true
			}
		}
		if !found {
			return -1, time.Time{}
		}
		start, why := s.startFrom(at, false)
		if why != "" {
			return -1, time.Time{}
		}
		for j := range s.queue {
			if s.done[j] || !s.queue[j].Urgent {
				continue
			}
			if r, ok := s.readyAt(j, start, out); ok && r.Equal(start) {
				return j, start
			}
		}
		t = start // its cluster busy by then: look from there
	}
	return -1, time.Time{}
}

// inLine returns the host the group's line starts next and when, under its
// calendar (candidate).
func (s *sim) inLine(out serversOut) (i int, start time.Time, why string) {
	for s.left > 0 {
		at, ok := s.next(out)
		if !ok {
			return -1, time.Time{}, "a server of its cluster stays out until it is released"
		}
		if at.After(s.t) {
			s.t = at // nobody may go yet: wait for the first backoff to end or cluster to be free
			continue
		}
		if start, why = s.start(s.t); why != "" {
			return -1, time.Time{}, why
		}
		// The first in line that may go by then does: a backoff over, or its
		// cluster free, by then.
		if j := s.first(start, out); j >= 0 {
			return j, start, ""
		}
		s.t = start // later than before: the host next could not go then, nobody could
	}
	return -1, time.Time{}, ""
}

// take starts host i at start, and counts it out of its server clusters.
func (s *sim) take(i int, start time.Time, out serversOut) {
	s.hosts[i].Start, s.hosts[i].Finish = start, start.Add(s.cycle)
	s.outs = append(s.outs, s.hosts[i].Finish)
	s.done[i], s.t = true, start
	s.left--
	out.add(s.queue[i].Clusters, start, s.hosts[i].Finish)
}

// fail gives the hosts not started why they have no estimate.
func (s *sim) fail(why string) {
	for j := range s.queue {
		if !s.done[j] {
			s.hosts[j].NoEstimate = why
			s.done[j] = true
		}
	}
	s.left = 0
}

// readyAt returns when host j may go, from t on: its backoff over and its
// server clusters free for a whole cycle; false when a cluster never is.
func (s *sim) readyAt(j int, t time.Time, out serversOut) (time.Time, bool) {
	return out.freeAt(s.queue[j].Clusters, later(t, s.ready[j]), s.cycle)
}

// next returns when the host left that may go soonest from s.t may go (s.t
// when one may go then); false when none of them ever may.
func (s *sim) next(out serversOut) (time.Time, bool) {
	var when time.Time
	found := false
	for i := range s.queue {
		if s.done[i] {
			continue
		}
		at, ok := s.readyAt(i, s.t, out)
		switch {
		case !ok:
		case !at.After(s.t):
			return at, true
		case !found || at.Before(when):
			when, found = at, true
		}
	}
	return when, found
}

// first returns the first host in FIFO order that may go at start, or -1.
func (s *sim) first(start time.Time, out serversOut) int {
	for j := range s.queue {
		if s.done[j] {
			continue
		}
		if at, ok := s.readyAt(j, start, out); ok && at.Equal(start) {
			return j
		}
	}
	return -1
}

// start returns the earliest time from t at which a host may start, or why
// none can within Reach.
func (s *sim) start(t time.Time) (time.Time, string) { return s.startFrom(t, true) }

// startFrom is start, under the group's calendar or (calendar false, for an
// urgent request) not.
func (s *sim) startFrom(t time.Time, calendar bool) (time.Time, string) {
	if s.capacity <= 0 {
		return time.Time{}, "its group has no slot it may use (concurrency or max_unavailable)"
	}
	for range 1000 {
		if t.Sub(s.now) > Reach {
			break
		}
		free, ok := s.slotFree(t)
		if !ok {
			return time.Time{}, "a stuck host keeps the slot it would need"
		}
		if free.After(t) {
			t = free
			continue
		}
		if back := s.backBy(t); s.settle > 0 && back.Add(s.settle).After(t) {
			t = back.Add(s.settle)
			continue
		}
		if !calendar {
			return t, ""
		}
		if ok, _, _ := s.sched.CanStartDrain(t, s.deadline); ok {
			return t, ""
		}
		next, ok := s.nextChance(t)
		if !ok {
			break
		}
		t = next
	}
	return time.Time{}, "no window within " + Reach.String() + " stays open for the drain deadline"
}

// slotFree returns when fewer than capacity hosts are out, from t on, and false
// when that depends on a host that never comes back by itself.
func (s *sim) slotFree(t time.Time) (time.Time, bool) {
	var out []time.Time
	never := 0
	for _, f := range s.outs {
		switch {
		case f.IsZero():
			never++
		case f.After(t):
			out = append(out, f)
		}
	}
	excess := never + len(out) - s.capacity // hosts that must come back first, plus one
	if excess < 0 {
		return t, true
	}
	if excess >= len(out) {
		return time.Time{}, false
	}
	slices.SortFunc(out, time.Time.Compare)
	return out[excess], true
}

// backBy returns when the last host came back, at or before t.
func (s *sim) backBy(t time.Time) time.Time {
	back := s.lastBack
	for _, f := range s.outs {
		if !f.IsZero() && !f.After(t) {
			back = later(back, f)
		}
	}
	return back
}

// nextChance returns the next time after t at which the window may allow a
// drain to start: its next opening, or, while it is open but closes too soon,
// the first opening after it closes.
func (s *sim) nextChance(t time.Time) (time.Time, bool) {
	if s.sched.Open(t) {
		t = t.Add(s.sched.Remaining(t))
		if s.sched.Open(t) {
			return t, true // open for longer than policy.Horizon
		}
	}
	next := s.sched.NextOpen(t)
	return next, !next.IsZero()
}

// serversOut is when hosts are out of each server cluster ("product/cluster"),
// as the hosts in progress and those estimated to start say.
type serversOut map[string][]outSpan

// outSpan is a host out of service from from until until (zero: not known, it
// keeps out until released).
type outSpan struct{ from, until time.Time }

// add counts a host out of clusters from from (zero: since before now) until
// until (zero: until released).
func (o serversOut) add(clusters []string, from, until time.Time) {
	for _, c := range clusters {
		o[c] = append(o[c], outSpan{from, until})
	}
}

// freeAt returns the first time from t at which none of clusters has a host
// out for length, and false when one keeps a host out until it is released.
func (o serversOut) freeAt(clusters []string, t time.Time, length time.Duration) (time.Time, bool) {
	for moved := true; moved; {
		moved = false
		for _, c := range clusters {
			for _, sp := range o[c] {
				if !sp.from.Before(t.Add(length)) || (!sp.until.IsZero() && !sp.until.After(t)) {
					continue // over before t, or starts after the cycle would end
				}
				if sp.until.IsZero() {
					return time.Time{}, false
				}
				t, moved = sp.until, true
			}
		}
	}
	return t, true
}

// sharesCluster reports whether a and b name a server cluster in common.
func sharesCluster(a, b []string) bool {
	return slices.ContainsFunc(a, func(c string) bool { return slices.Contains(b, c) })
}

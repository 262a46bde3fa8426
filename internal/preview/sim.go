package preview

import (
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/coordinator"
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
//     the drain deadline (policy.Schedule.CanStartDrain, the rule admission
//     applies); otherwise the host waits for the next opening that leaves that
//     much time. The reboot and rejoin may run past the window's end, as they
//     do in the coordinator.
//
// Nothing else is foreseen: nodes that are unavailable stay so, gates stay
// open, no new need appears.
type sim struct {
	now      time.Time
	cycle    time.Duration
	capacity int
	settle   time.Duration
	sched    policy.Schedule
	deadline time.Duration
	outs     []time.Time // when each host out comes back; zero: not known (stuck)
	lastBack time.Time   // when a host of the group last came back, from history
}

// run estimates queue's hosts (in FIFO order) into hosts (the same order).
func (s *sim) run(queue []coordinator.PreviewHost, hosts []Host) {
	ready := make([]time.Time, len(queue))
	for i, ph := range queue {
		ready[i] = s.now
		if ph.Plan.NextTry.After(s.now) {
			ready[i] = ph.Plan.NextTry
		}
	}
	done := make([]bool, len(queue))
	t := s.now
	for left := len(queue); left > 0; {
		i := s.next(ready, done, t)
		if ready[i].After(t) {
			t = ready[i] // nobody is ready yet: wait for the first backoff to end
			continue
		}
		start, why := s.start(t)
		if why != "" {
			for j := range queue {
				if !done[j] {
					hosts[j].NoEstimate = why
				}
			}
			return
		}
		if j := s.earlier(ready, done, i, start); j >= 0 {
			t = ready[j] // an earlier request is back from its backoff by then
			continue
		}
		hosts[i].Start, hosts[i].Finish = start, start.Add(s.cycle)
		s.outs = append(s.outs, hosts[i].Finish)
		done[i], t = true, start
		left--
	}
}

// next returns the first host in FIFO order that is ready at t, or else the
// one that is ready soonest.
func (s *sim) next(ready []time.Time, done []bool, t time.Time) int {
	soonest := -1
	for i := range ready {
		if done[i] {
			continue
		}
		if !ready[i].After(t) {
			return i
		}
		if soonest < 0 || ready[i].Before(ready[soonest]) {
			soonest = i
		}
	}
	return soonest
}

// earlier returns a host before i in FIFO order that is ready by start, or -1.
func (s *sim) earlier(ready []time.Time, done []bool, i int, start time.Time) int {
	for j := range i {
		if !done[j] && !ready[j].After(start) {
			return j
		}
	}
	return -1
}

// start returns the earliest time from t at which a host may start, or why
// none can within Reach.
func (s *sim) start(t time.Time) (time.Time, string) {
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
		if ok, _ := s.sched.CanStartDrain(t, s.deadline); ok {
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

package wave

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// A verdict on a wave comes from the cycles rollboot ran, as its plans show
// them, never from a record: a canary failed when its cycle ended stuck, in a
// backoff (its reboot failed on the host, its drain was aborted, its node was
// gone, it was abandoned), or back with its workloads unhealthy at the healthy
// deadline (healthy.on_deadline = "release"). The fingerprint, a host's
// claim, decides only which wave that host itself is in.

// Observe returns the state with what the pass saw: a wave first seen for each
// tracked group and fingerprint a host claims that is not out (pending, or
// about to be: its need seen in this pass), each member's cycle
// judged from its plan, the waves finished, and the canaries that failed in
// this pass (each wave holds on its first failure).
func Observe(st State, r Rules, hosts []Host, now time.Time) (State, []Failure) {
	st = st.clone()
	for _, h := range hosts {
		if h.Fingerprint != "" && !h.Plan.Active() && r.Tracked(h.Group) && st.find(h.Group, h.Fingerprint) < 0 {
			st.Waves = append(st.Waves, Wave{Group: h.Group, Fingerprint: h.Fingerprint, Seen: now})
		}
	}
	plans := byName(hosts)
	var failed []Failure
	for i := range st.Waves {
		w := &st.Waves[i]
		if f, ok := judge(w, plans, now); ok {
			failed = append(failed, f)
		}
		if w.Finished.IsZero() && finished(*w, hosts) {
			w.Finished = now
		}
	}
	return prune(st), failed
}

// judge updates the wave's members from their plans: a canary's verdict, a
// member's cycle that ended. It returns the wave's first canary failure.
func judge(w *Wave, plans map[string]Host, now time.Time) (Failure, bool) {
	var f Failure
	failed := false
	members := w.Members[:0]
	for _, m := range w.Members {
		h, seen := plans[m.Host]
		p := h.Plan
		if !seen {
			p = store.Plan{Host: m.Host, Phase: store.PhaseIdle} // no plan: nothing runs
		}
		ok, bad, ended := verdict(m, p)
		switch {
		case !m.Canary && ended:
			if ok {
				w.Completed++
			}
			continue // forgotten: its cycle ended
		case m.Canary && !m.Done.IsZero():
		case m.Canary && ok:
			m.Done = p.LastCompleted
		case m.Canary && bad != "":
			if w.Failed == "" {
				w.Failed, w.FailedAt = m.Host+": "+bad, now
				f, failed = Failure{Group: w.Group, Fingerprint: w.Fingerprint, Host: m.Host, Reason: bad}, true
			}
		case m.Canary && ended:
			continue // taken back with no verdict (canceled): another host may be the canary
		}
		members = append(members, m)
	}
	w.Members = members
	return f, failed
}

// verdict judges the cycle of member m from its host's plan: ok, it came back
// healthy; bad, how it failed; ended, its cycle is over (either, or taken back).
func verdict(m Member, p store.Plan) (ok bool, bad string, ended bool) {
	switch {
	case p.Phase == store.PhaseStuck:
		return false, "stuck: " + p.LastError, false
	case p.Active():
		return false, "", false
	case !p.LastCompleted.IsZero() && !p.LastCompleted.Before(m.At):
		if p.LastUnhealthy != "" {
			return false, "back with workloads unhealthy at the healthy deadline: " + p.LastUnhealthy, true
		}
		return true, "", true
	case p.Phase == store.PhaseBackoff && !p.PhaseSince.Before(m.At):
		return false, p.LastError, true
	case p.Phase == store.PhasePending && !p.PhaseSince.After(m.At):
		return false, "", false // granted, its grant not stored yet
	case !p.PhaseSince.Before(m.At):
		return false, "", true // canceled, released from pending
	}
	return false, "", false
}

// finished: no host of the group is pending in the wave, no member is out (or
// stuck), and at least one came back healthy.
func finished(w Wave, hosts []Host) bool {
	if w.Failed != "" {
		return false
	}
	done := w.Completed > 0
	for _, m := range w.Members {
		if !m.Canary || m.Done.IsZero() {
			return false // out, or a canary not back yet
		}
		done = true
	}
	if !done {
		return false
	}
	for _, h := range hosts {
		if h.Group == w.Group && h.Fingerprint == w.Fingerprint && h.pendingIn() {
			return false
		}
	}
	return true
}

// prune keeps the newest keep waves: the unfinished first, then those
// finished last; sorted by group and fingerprint.
func prune(st State) State {
	if len(st.Waves) > keep {
		slices.SortStableFunc(st.Waves, func(a, b Wave) int {
			switch {
			case a.Finished.IsZero() != b.Finished.IsZero():
				if a.Finished.IsZero() {
					return -1
				}
				return 1
			case !a.Finished.Equal(b.Finished):
				return b.Finished.Compare(a.Finished)
			}
			return b.Seen.Compare(a.Seen)
		})
		st.Waves = st.Waves[:keep]
	}
	slices.SortFunc(st.Waves, func(a, b Wave) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Fingerprint, b.Fingerprint))
	})
	return st
}

// Holds says why each pending host of the queue may not start in its wave
// (absent: it may), and when a hold ends by itself (a soak; zero: none). The
// queue is in the order hosts are served (first come, first served).
func Holds(st State, r Rules, queue []Host, now time.Time) (map[string]phase.WaitReason, time.Time) {
	out, until := HoldsUntil(st, r, queue, now)
	var recheck time.Time
	for _, t := range until {
		recheck = phase.Earliest(recheck, t)
	}
	return out, recheck
}

// HoldsUntil is Holds with, for each host held by a soak, when it ends (the
// estimates of `rollboot plan`).
func HoldsUntil(st State, r Rules, queue []Host, now time.Time) (map[string]phase.WaitReason, map[string]time.Time) {
	out, until := map[string]phase.WaitReason{}, map[string]time.Time{}
	offered := map[int]int{} // wave index -> hosts offered to be its canaries in this pass
	for _, h := range queue {
		if !h.pendingIn() || !r.Tracked(h.Group) {
			continue
		}
		gr := r[h.Group]
		if why, at := after(st, r, h, now); !why.IsZero() {
			out[h.Name] = why
			setUntil(until, h.Name, at)
			continue
		}
		if gr.Canaries == 0 {
			continue
		}
		i := st.find(h.Group, h.Fingerprint)
		if i < 0 {
			out[h.Name] = reason(phase.WaitCanary, "of a wave not recorded yet (fingerprint %s)", Short(h.Fingerprint))
			continue
		}
		if why, at := canary(st.Waves[i], gr, h, offered[i], now); !why.IsZero() {
			out[h.Name] = why
			setUntil(until, h.Name, at)
		} else if !isCanary(st.Waves[i], h.Name) {
			offered[i]++
		}
	}
	return out, until
}

func setUntil(until map[string]time.Time, host string, at time.Time) {
	if !at.IsZero() {
		until[host] = at
	}
}

func isCanary(w Wave, host string) bool {
	return slices.ContainsFunc(w.Members, func(m Member) bool { return m.Canary && m.Host == host })
}

// canary says why h, pending in wave w, waits for its canaries (zero: it
// may go, as a canary or after them), and until when for a soak. offered
// hosts of the wave were already let go as new canaries in this pass.
func canary(w Wave, gr GroupRules, h Host, offered int, now time.Time) (phase.WaitReason, time.Time) {
	if w.Failed != "" {
		return reason(phase.WaitCanaryFailed, "%s (%s; the wave is held)", w.Failed, w.Name()), time.Time{}
	}
	if isCanary(w, h.Name) {
		return phase.WaitReason{}, time.Time{}
	}
	cs := w.canaries()
	if len(cs)+offered < gr.Canaries {
		return phase.WaitReason{}, time.Time{} // goes as a canary
	}
	var out []string
	var last time.Time
	for _, c := range cs {
		if c.Done.IsZero() {
			out = append(out, c.Host)
		}
		last = latest(last, c.Done)
	}
	switch {
	case len(out) > 0:
		return reason(phase.WaitCanary, "%s (%s)", strings.Join(out, ", "), w.Name()), time.Time{}
	case len(cs) == 0:
		return reason(phase.WaitCanary, "hosts ahead in line (%s)", w.Name()), time.Time{}
	}
	if until := last.Add(gr.Soak); now.Before(until) {
		return reason(phase.WaitCanarySoak, "%s (%s)", until.UTC().Format(time.RFC3339), w.Name()), until
	}
	return phase.WaitReason{}, time.Time{}
}

// after says why h may not start its wave because of a group its group
// follows (zero: none holds it), and until when for a soak. A followed
// group that has not had the wave at all holds it for after_soak from when the
// wave was first seen in h's group: time for the followed group to show the
// need if it is going to.
func after(st State, r Rules, h Host, now time.Time) (phase.WaitReason, time.Time) {
	gr := r[h.Group]
	for _, a := range gr.After {
		w, ok := st.Wave(a, h.Fingerprint)
		switch {
		case ok && w.Failed != "":
			return reason(phase.WaitAfterGroup, "%q: its canary failed (%s)", a, w.Name()), time.Time{}
		case ok && w.Finished.IsZero():
			return reason(phase.WaitAfterGroup, "%q: waiting for it to finish %s", a, w.Name()), time.Time{}
		case ok:
			if until := w.Finished.Add(gr.AfterSoak); now.Before(until) {
				return reason(phase.WaitAfterGroup, "%q: %s finished, soak until %s", a, w.Name(), until.UTC().Format(time.RFC3339)), until
			}
		default:
			own, _ := st.Wave(h.Group, h.Fingerprint)
			if own.Seen.IsZero() {
				return reason(phase.WaitAfterGroup, "%q: wave %s not recorded yet", a, Short(h.Fingerprint)), time.Time{}
			}
			if until := own.Seen.Add(gr.AfterSoak); now.Before(until) {
				return reason(phase.WaitAfterGroup, "%q: no host of it needs wave %s; starting at %s unless one does",
					a, Short(h.Fingerprint), until.UTC().Format(time.RFC3339)), until
			}
		}
	}
	return phase.WaitReason{}, time.Time{}
}

// Grant returns the state with the hosts admitted now (granted their slot)
// recorded in their waves: as canaries while their wave has fewer than its
// group's, else as members until their cycle ends (for the wave's finish). It
// reports whether it changed anything: the state must then be stored before
// the grants are carried out.
func Grant(st State, r Rules, admitted []Host, now time.Time) (State, bool) {
	st = st.clone()
	changed := false
	for _, h := range admitted {
		if h.Fingerprint == "" || !r.Tracked(h.Group) {
			continue
		}
		i := st.find(h.Group, h.Fingerprint)
		if i < 0 {
			st.Waves = append(st.Waves, Wave{Group: h.Group, Fingerprint: h.Fingerprint, Seen: now})
			i = len(st.Waves) - 1
		}
		w := &st.Waves[i]
		j := slices.IndexFunc(w.Members, func(m Member) bool { return m.Host == h.Name })
		switch {
		case j >= 0 && w.Members[j].Canary && !w.Members[j].Done.IsZero():
			w.Members[j].At, w.Members[j].Done = now, time.Time{} // a canary again: judged anew
		case j >= 0:
			continue
		default:
			w.Members = append(w.Members, Member{Host: h.Name, At: now, Canary: len(w.canaries()) < r[h.Group].Canaries})
		}
		changed = true
	}
	return prune(st), changed
}

// Resume returns the state with the canary failures of group's waves seen
// before at forgotten, and their failed canaries with them (the operator
// resumed the group at at): each such wave picks its canaries again.
func Resume(st State, group string, at time.Time) State {
	st = st.clone()
	for i := range st.Waves {
		w := &st.Waves[i]
		if w.Group != group || w.Failed == "" || !w.FailedAt.Before(at) {
			continue
		}
		w.Failed, w.FailedAt = "", time.Time{}
		w.Members = slices.DeleteFunc(w.Members, func(m Member) bool { return m.Canary && m.Done.IsZero() })
	}
	return st
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

package coordinator

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/allocsource"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Handing a freed slot out in the pass that freed it. A cycle that closes frees
// its group's slot once its plan is stored; the next host in line used to wait
// for the next pass to see it. So after the pass's decisions are carried out,
// a pass that closed a cycle admits again (regrantFreed) and starts the drains
// of the hosts that get the slots freed; a pass that made hosts pending does
// the same, so that a host whose need appears while its group has room is
// granted in that pass. What makes it safe (admission on the plans as stored,
// only after a pass whose reads and writes all succeeded, the heads of each
// line granted on their pending plans as decided, hosts that run servers left
// to the next pass, stale views that err the safe way): docs/architecture.md,
// "Crash safety", step 5.

// writeSignals is what the writes a pass stores together tell its hand-out
// while they are carried out (storeAndHandOut).
type writeSignals struct {
	freed  chan struct{} // a slot was freed (at most one waiting)
	failed atomic.Bool   // a write failed
}

func newWriteSignals() *writeSignals { return &writeSignals{freed: make(chan struct{}, 1)} }

// slotFreed tells that a write freed a slot.
func (w *writeSignals) slotFreed() {
	select {
	case w.freed <- struct{}{}:
	default: // one is waiting already
	}
}

// carriedOut is a pendingWrite's done: a failure is noted, then, after a
// success, stored (nil: nothing) runs.
func (w *writeSignals) carriedOut(stored func()) func(error) {
	return func(err error) {
		if err != nil {
			w.failed.Store(true)
			return
		}
		if stored != nil {
			stored()
		}
	}
}

// storeAndHandOut carries out the pass's writes stored together (first) and
// hands out the slots they free (regrantFreed) as they free them: while the
// writes go on, a hand-out starts each time a slot was freed and no hand-out
// runs, over the slots freed since the last one and those freed while it
// waits for their reads ahead; once every write is done, a
// last one hands out the rest, with the hosts the pass made pending and the
// heads of the lines (heads, whose grants it tried: the result). A wave of
// closes, 24 at a time, so no longer holds the slots its first closes free
// until its last close is stored. None hands out once a write failed, nor
// when the pass failed before (!mayHandOut). Why a hand-out beside the
// writes is as safe as after them: docs/architecture.md, "Crash safety",
// step 5.
func (c *Coordinator) storeAndHandOut(ctx context.Context, s *snapshot, adm admission.Result, r routed,
	first, heads []pendingWrite, mayHandOut bool) (map[string]bool, error) {
	sig := newWriteSignals()
	ahead := c.readAhead(ctx, s, adm, first, sig)
	done := make(chan error, 1)
	go func() { done <- c.storePlans(ctx, first, PlanWriteParallelism) }()
	handed, writing := map[string]bool{}, map[string]bool{}
	for _, w := range first {
		writing[w.in.Plan.Host] = true
	}
	var writesErr, handOutErr error
	skipped := false // an early hand-out left a host admitted to the last one
	for more := true; more; {
		select {
		case writesErr = <-done:
			more = false
		case <-sig.freed:
			if !mayHandOut || sig.failed.Load() {
				continue
			}
			frees := c.freedSince(r.freed, handed)
			if len(frees) == 0 {
				continue
			}
			holds := ahead.sofar(frees)
			if more := c.freedSince(r.freed, handed); len(more) > 0 {
				// Freed while this one waited for its reads: a wave's closes
				// land together, and a hand-out each would read and admit twice.
				frees = append(frees, more...)
				holds = ahead.sofar(frees)
			}
			out, err := c.regrantFreed(ctx, s, adm, handOut{freed: frees, holdsAhead: holds, writing: writing})
			if err != nil {
				handOutErr, mayHandOut = err, false
			}
			skipped = skipped || out.skipped
		}
	}
	holds := ahead.all()
	if writesErr != nil || !mayHandOut {
		return nil, errors.Join(writesErr, handOutErr)
	}
	if skipped {
		clear(handed) // the last hand-out admits again for every slot freed
	}
	out, err := c.regrantFreed(ctx, s, adm, handOut{freed: c.freedSince(r.freed, handed), pended: r.pended, heads: heads, holdsAhead: holds})
	return out.granted, err
}

// freedSince returns the hosts of freed whose slot is free as stored and
// not handed out yet, and notes them handed out.
func (c *Coordinator) freedSince(freed []string, handed map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range freed {
		if p, ok := c.plans[name]; ok && !p.Active() && !handed[name] {
			handed[name] = true
			out = append(out, name)
		}
	}
	return out
}

// readAhead has each of writes that may free a slot (a close, a rejoin that
// may close), once carried out with its slot freed, start reading the
// allocations of the node of the next host in its group's line
// (admission.NextInLine; first, the pass's admission) beside the pass's other
// writes, for the hand-out's capacity gate and system jobs (they find them as
// the pass's reads: allocsource.Source.InPass), and tell sig; and it reads the
// workload blockers of those groups' queued hosts (workloadsAhead). Every
// write tells sig when it failed.
func (c *Coordinator) readAhead(ctx context.Context, s *snapshot, first admission.Result, writes []pendingWrite, sig *writeSignals) *readsAhead {
	r := &readsAhead{s: s}
	slots := map[string]int{}
	for i, w := range writes {
		if !w.d.FreesSlot(w.in) && w.rejoin == nil {
			writes[i].done = sig.carriedOut(nil)
			continue
		}
		name, group := w.in.Plan.Host, s.hosts[w.in.Plan.Host].group
		slots[group]++
		writes[i].done = sig.carriedOut(func() {
			c.mu.Lock()
			p, ok := c.plans[name]
			c.mu.Unlock()
			if ok && !p.Active() {
				r.allocs.ReadNext(group) // its slot is free
				sig.slotFreed()
			}
		})
	}
	if len(slots) == 0 {
		return r // no queue to build
	}
	queue := admissionQueue(s)
	r.allocs = c.allocs.Ahead(ctx, admission.NextInLine(queue, first.Wait, slots))
	r.holds = c.workloadsAhead(ctx, s, queue, slots)
	return r
}

// readsAhead is what readAhead reads beside the pass's writes.
type readsAhead struct {
	allocs *allocsource.Ahead // nil: no write may free a slot
	holds  func() map[string]phase.WaitReason
	s      *snapshot // the pass's: each host's group
}

// sofar returns, once the reads ahead started for the groups of hosts (whose
// slots were freed while the pass's other writes go on) ended, the workload
// blockers' holds read ahead, by host.
func (r *readsAhead) sofar(hosts []string) map[string]phase.WaitReason {
	if r.allocs == nil {
		return nil
	}
	var lines []string
	for _, h := range hosts {
		lines = append(lines, r.s.hosts[h].group)
	}
	r.allocs.WaitFor(lines...)
	return r.holds()
}

// all returns, once every read ahead ended, the workload blockers' holds read
// ahead; called once the writes are done, the reads left then go
// ReadAheadWidened at a time (allocsource.Ahead.Widen).
func (r *readsAhead) all() map[string]phase.WaitReason {
	if r.allocs == nil {
		return nil
	}
	r.allocs.Widen()
	r.allocs.Wait()
	return r.holds()
}

// workloadsAhead reads, beside the pass's writes, the workload blockers of
// the queued hosts of the groups whose slots the pass may free (groups) that
// the pass's admission did not read for: it reads only for the groups with a
// slot free (admission, slotFree), so the hand-out would otherwise wait for
// the lists it then asks for. It returns the holds, once read (none when the
// blockers are off or every such host was read).
func (c *Coordinator) workloadsAhead(ctx context.Context, s *snapshot, queue []admission.Pending, groups map[string]int) func() map[string]phase.WaitReason {
	var names []string
	if c.admitRules().Workloads {
		for _, p := range queue {
			if groups[p.Group] > 0 && p.Pool != "" && !s.workloads.read(p.Host) {
				names = append(names, p.Host)
			}
		}
	}
	if len(names) == 0 {
		return func() map[string]phase.WaitReason { return nil }
	}
	done := make(chan struct{})
	var holds map[string]phase.WaitReason
	go func() {
		defer close(done)
		holds = c.workloadHolds(ctx, s, names)
	}()
	return func() map[string]phase.WaitReason { <-done; return holds }
}

// handOut is what a hand-out hands out (regrantFreed): the slots of freed,
// the hosts whose decision frees their slot (carried out or not); the hosts
// of pended, whose decision makes them pending; heads, the pending decisions
// of the hosts first in their group's line (headsFirst), not stored yet: a
// head's grant is its first write; holdsAhead, the workload blockers' holds
// read ahead for it (readAhead); writing, the hosts whose write may still be
// under way, which it leaves alone (a grant of one would race that write's
// check-and-set).
type handOut struct {
	freed, pended []string
	heads         []pendingWrite
	holdsAhead    map[string]phase.WaitReason
	writing       map[string]bool
}

// handedOut is what a hand-out did: granted, the heads whose grant it tried,
// stored or not; skipped, whether it left alone a host it admitted, whose
// write may have been under way (handOut.writing).
type handedOut struct {
	granted map[string]bool
	skipped bool
}

// regrantFreed admits again, once the writes of the pass carried out so far
// succeeded, when one of them freed a slot or made a host pending (h), and
// carries out the grants of the hosts that get a slot now. The heads whose
// grant it tried are not to be stored pending after it (a grant that failed
// leaves the plan as it was before the pass, and the next pass decides
// again). first is the pass's admission; s its snapshot.
func (c *Coordinator) regrantFreed(ctx context.Context, s *snapshot, first admission.Result, h handOut) (handedOut, error) {
	c.mu.Lock()
	stored := c.plans
	closed := false
	for _, name := range h.freed {
		if p, ok := stored[name]; ok && !p.Active() {
			closed = true // its close is stored
		}
	}
	newcomers := map[string]*pendingWrite{}
	for _, name := range h.pended {
		if p, ok := stored[name]; ok && p.Phase == store.PhasePending {
			newcomers[name] = nil // stored pending
		}
	}
	if stored == nil || !closed && len(newcomers) == 0 && len(h.heads) == 0 {
		c.mu.Unlock()
		return handedOut{}, nil
	}
	s2 := *s
	s2.now = c.now()
	s2.plans = maps.Clone(stored)
	c.mu.Unlock()
	for i, head := range h.heads {
		// Pending as decided, its plan as stored before the pass: the grant's
		// check-and-set is on that one.
		p := head.d.Plan
		p.ModifyIndex = head.in.Plan.ModifyIndex
		s2.plans[p.Host] = p
		newcomers[p.Host] = &h.heads[i]
	}
	s2.listBusy()
	s2.capacity = nil // a gate of its own, with the pass's drains out; what the pass read is taken as read (capacityread.Reader.InPass)
	octx, cancel := c.stepContext(ctx)
	defer cancel()
	s2.workloads = handOutWorkloads(s, h.holdsAhead, len(newcomers) > 0)
	adm := c.grantWaves(octx, &s2, c.admit(octx, &s2)) // holds.go
	if err := octx.Err(); err != nil {
		return handedOut{}, c.stepFailed(octx, ctx, err)
	}
	var writes, cordons []pendingWrite
	out := handedOut{granted: map[string]bool{}}
	for _, name := range busyNames(&s2) { // the hosts admitted are pending
		if h.writing[name] {
			out.skipped = out.skipped || adm.Admitted[name] || adm.Cordon[name]
			continue // its write may still be under way: the last hand-out's
		}
		hv := s2.hosts[name]
		head, isNew := newcomers[name]
		if w, ok := c.cordonNow(&s2, adm, name, isNew); ok {
			cordons = append(cordons, w)
			continue
		}
		if !adm.Admitted[name] || first.Wait[name].Kind != phase.WaitQueued && !isNew || hv.err != nil {
			continue
		}
		if hv.rec != nil && len(hv.rec.Servers) > 0 {
			continue
		}
		in := c.input(&s2, adm, name)
		d := phase.Step(in)
		c.noteRecheck(d)
		if in.Plan.Phase != store.PhasePending || !d.StartDrain || !d.StoredApart() {
			continue // not a plain grant: the next pass decides for it
		}
		if head != nil {
			out.granted[name] = true
			logEvent(c.hostLog(head.d), head.d) // what storing its pending plan would have logged
		}
		writes = append(writes, pendingWrite{in: in, d: d})
	}
	if len(writes) > 0 {
		c.log.Debug("slots freed in this pass handed out", "hosts", len(writes))
	}
	if err := c.storePlans(ctx, cordons, PlanWriteParallelism); err != nil {
		return out, err // no drain without the cordons before it
	}
	return out, c.storePlans(ctx, writes, handOutParallelism)
}

// handOutWorkloads is what a hand-out knows of the workload blockers before
// it admits: nothing with newcomers (what the pass read was for its own
// queue, which they were not in: read again, after the pass's drains), else
// the pass's reads with those made beside its writes (workloadsAhead).
func handOutWorkloads(s *snapshot, ahead map[string]phase.WaitReason, newcomers bool) *workloadView {
	switch {
	case newcomers:
		return nil
	case len(ahead) == 0:
		return s.workloads
	}
	return s.workloads.with(ahead)
}

// cordonNow is the cordon of a host that the hand-out makes next in line
// (stored pending before the pass, not admitted), carried out before the
// hand-out's drains so that what they move does not land on its node; ok is
// false for any other host or decision. A host cordoned already (its node as
// the pass read it may not show it yet) is left to the next pass.
func (c *Coordinator) cordonNow(s *snapshot, adm admission.Result, name string, isNew bool) (pendingWrite, bool) {
	hv, p := s.hosts[name], s.plans[name]
	if !adm.Cordon[name] || adm.Admitted[name] || isNew || hv.err != nil || p.Phase != store.PhasePending || !p.CordonedAt.IsZero() {
		return pendingWrite{}, false
	}
	in := c.input(s, adm, name)
	d := phase.Step(in)
	if !d.Cordon || d.StartDrain || d.Plan.Phase != store.PhasePending || !d.StoredApart() {
		return pendingWrite{}, false
	}
	c.noteRecheck(d)
	return pendingWrite{in: in, d: d}, true
}

// notGranted returns the heads whose grant the hand-out did not carry out:
// their pending plans are stored with the rest.
func notGranted(heads []pendingWrite, granted map[string]bool) []pendingWrite {
	var out []pendingWrite
	for _, h := range heads {
		if !granted[h.in.Plan.Host] {
			out = append(out, h)
		}
	}
	return out
}

// headsFirst splits a pass's writes stored together: first, every write but
// those that only make a host pending; heads, the pending decisions of the
// hosts that may get a slot now, in each group as many as it has slots
// (policy.Slots) in the order admission serves them; rest, the others. When
// every host's need appears at once (a patch day), one pass makes hundreds of
// hosts pending, and storing all of them before the first grant delayed the
// first drain of every group by as many writes; storing the heads' pending
// plans first still delayed it by one write each. So the hand-out admits the
// heads as decided (regrantFreed), and a head's grant is its first write; the heads
// not granted are stored pending with rest, after it. Nothing in rest takes or
// frees a slot, so handing out before it is stored is as safe as after.
func headsFirst(s *snapshot, writes []pendingWrite) (first, rest, heads []pendingWrite) {
	var newcomers []policy.Request
	byHost := map[string]pendingWrite{}
	for _, w := range writes {
		if w.d.BecomesPending(w.in) && w.d.PlanOnly() {
			name := w.in.Plan.Host
			newcomers = append(newcomers, policy.Request{Host: name, Group: s.hosts[name].group, RequestedAt: w.d.Plan.RequestedAt})
			byHost[w.in.Plan.Host] = w
			continue
		}
		first = append(first, w)
	}
	if len(newcomers) == 0 {
		return first, nil, nil
	}
	slots := map[string]int{}
	for _, g := range s.statuses {
		slots[g.Group.Name] = policy.Slots(g.Group, g.Size)
	}
	taken := map[string]int{}
	for _, q := range policy.InQueueOrder(newcomers) {
		if taken[q.Group] < slots[q.Group] {
			taken[q.Group]++
			heads = append(heads, byHost[q.Host])
			continue
		}
		rest = append(rest, byHost[q.Host])
	}
	return first, rest, heads
}

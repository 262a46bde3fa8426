// Package preview builds `rollboot plan`: the rollout a policy produces from the
// cluster as it is now, without changing anything. The coordinator's own pass says
// which hosts start now and why the others wait (coordinator.Preview); this package
// orders each group's queue, estimates when every host starts and finishes, from the
// durations recorded in history and the group's windows, compares two plans (Diff)
// and renders them. Everything here is pure: time comes in as Input.Now.
package preview

import (
	"cmp"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Reach is how far ahead starts are estimated: a host that could not start
// within it (its window never opens long enough, say) gets no estimate.
const Reach = 8 * 7 * 24 * time.Hour

// Input is what a plan is built from.
type Input struct {
	Now time.Time
	// Observed is what the coordinator's pass would decide now, under the
	// policy being previewed.
	Observed Observed
	// DrainDeadline is the policy's drain deadline: a drain starts only when
	// its window stays open at least that long (policy.Schedule.CanStartDrain).
	DrainDeadline time.Duration
	// GroupDrainDeadlines are the drain deadlines of the groups that set their
	// own (drain block of a group), in place of DrainDeadline.
	GroupDrainDeadlines map[string]time.Duration
	// Settle is, by group, the minimum time between one host of the group
	// coming back and the next one starting (none when absent).
	Settle map[string]time.Duration
	// History is the stored history, for the step durations.
	History []store.HistoryRecord
	// CanarySoak is, by group, how long the rest of a wave waits after its
	// canaries are back (a group's canary block; none when absent).
	CanarySoak map[string]time.Duration
	// AfterSoak is, by group, how long after the groups it follows finished a
	// wave it starts it (a group's after_soak).
	AfterSoak map[string]time.Duration
}

// Plan is the previewed rollout.
type Plan struct {
	Now         time.Time `json:"now"`
	Paused      bool      `json:"paused"`
	PauseReason string    `json:"pause_reason,omitempty"`
	// PausedUntil: when the pause ends by itself; the estimates start then.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	Groups      []Group   `json:"groups"` // groups with a host to reboot or in progress
	// Finish is the estimated end of the whole rollout: the latest host's
	// finish (zero when there is nothing to do or nothing could be estimated).
	Finish time.Time `json:"finish,omitzero"`
	// Unestimated counts the hosts without an estimate: Finish is then only
	// the end of the others.
	Unestimated int `json:"unestimated"`
	// Unreadable are hosts left out because a read their decision needs failed.
	Unreadable map[string]string `json:"unreadable,omitempty"`
	// Halts say which scopes the failure budgets halted: their hosts have no
	// estimate, the rollout does not finish until they are resumed.
	Halts []string `json:"halts,omitempty"`
}

// Group is one group's part of the rollout.
type Group struct {
	Name        string `json:"name"`
	Size        int    `json:"size"`
	Concurrency int    `json:"concurrency"`
	Slots       int    `json:"slots"`    // policy.Slots: concurrency, limited by max_unavailable
	Capacity    int    `json:"capacity"` // hosts it may have out at once given its unavailable nodes
	Active      int    `json:"active"`   // hosts out of service for rollboot now
	Unavailable int    `json:"unavailable"`
	Hold        string `json:"hold,omitempty"` // why no host of the group may start now
	// Windows are the windows its drains may start in, named by the group
	// or inherited from the file (policy.Schedule.String).
	Windows   string        `json:"windows"`
	Settle    time.Duration `json:"settle,omitempty"`
	Durations Durations     `json:"durations"`
	Hosts     []Host        `json:"hosts"` // in progress first, then the queue in order
	Finish    time.Time     `json:"finish,omitzero"`
}

// Host is one host's part of the rollout.
type Host struct {
	Host  string `json:"host"`
	Group string `json:"group"`
	Phase string `json:"phase"`
	// Position is the host's place in its group's queue, from 1 (0: in
	// progress, or blocked by something time does not end).
	Position int  `json:"position,omitempty"`
	Starts   bool `json:"starts"` // a pass now would grant it
	// WaitKind names what holds it (phase.WaitKind.Name); Reason says it
	// in words, as `rollboot status` does.
	WaitKind string `json:"wait_kind,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Need is why the host reboots (its plan's reason: a package need, a
	// request, "uptime 31.4d > 30d").
	Need string `json:"need,omitempty"`
	// Canary: it is, or starting now would be, a canary of its wave.
	Canary bool `json:"canary,omitempty"`
	// Blocked: what holds it does not end with time (a gate, a missing agent,
	// a node not ready, a stuck host in the way): it has no estimate.
	Blocked bool      `json:"blocked"`
	Start   time.Time `json:"start,omitzero"`
	Finish  time.Time `json:"finish,omitzero"`
	// NoEstimate says why Start and Finish are unknown.
	NoEstimate string `json:"no_estimate,omitempty"`
	// Cordon: "cordoned" while the host's node is kept ineligible as next in
	// line (node_meta.cordon_next), or "no cordon: " and why it is not.
	Cordon string `json:"cordon,omitempty"`
}

// timed reports whether what holds a waiting host ends with time alone (a
// slot, a window, a backoff, another server of its cluster out, a pause that
// is assumed to end now).
func timed(k phase.WaitKind) bool {
	switch k {
	case phase.NotWaiting, phase.WaitGroupBudget, phase.WaitSlot, phase.WaitQueued,
		phase.WaitSettle, phase.WaitBackoff, phase.WaitRebootLoop, phase.WaitPaused,
		phase.WaitServerOut: // until the other server is back (serve)
		return true
	}
	return false
}

// Build estimates the rollout. A host that waits for the groups its group
// follows to finish its wave starts no sooner than their estimated finish and
// its group's after_soak: the groups are estimated again with that, as often
// as such an order can be chained.
func Build(in Input) Plan {
	p := build(in)
	for range in.Observed.Groups {
		hosts, chained := chainAfter(in, p)
		if !chained {
			break
		}
		in.Observed.Hosts = hosts
		p = build(in)
	}
	return p
}

// chainAfter returns the observed hosts with NotBefore set on those that wait
// for groups whose finish p estimates, and whether it set any.
func chainAfter(in Input, p Plan) ([]ObservedHost, bool) {
	finish, unestimated := map[string]time.Time{}, map[string]bool{}
	for _, g := range p.Groups {
		finish[g.Name] = g.Finish
		for _, h := range g.Hosts {
			unestimated[g.Name] = unestimated[g.Name] || h.Finish.IsZero()
		}
	}
	hosts := slices.Clone(in.Observed.Hosts)
	chained := false
	for i, h := range hosts {
		if len(h.After) == 0 || !h.NotBefore.IsZero() {
			continue
		}
		var at time.Time
		known := true
		for _, a := range h.After {
			known = known && !unestimated[a] && !finish[a].IsZero()
			at = later(at, finish[a])
		}
		if known {
			hosts[i].NotBefore, chained = at.Add(in.AfterSoak[h.Group]), true
		}
	}
	return hosts, chained
}

// build estimates the rollout once.
func build(in Input) Plan {
	measured := Measure(in.History)
	p := Plan{Now: in.Now, Paused: in.Observed.Paused, PauseReason: in.Observed.PauseReason, PausedUntil: in.Observed.PausedUntil}
	for _, h := range in.Observed.Halts {
		p.Halts = append(p.Halts, h.Text())
	}
	if in.Observed.HaltsUnknown != "" {
		p.Halts = append(p.Halts, "the halt state cannot be read: "+in.Observed.HaltsUnknown)
	}
	if len(in.Observed.Unreadable) > 0 {
		p.Unreadable = in.Observed.Unreadable
	}
	byGroup := map[string][]ObservedHost{}
	for _, h := range in.Observed.Hosts {
		byGroup[h.Group] = append(byGroup[h.Group], h)
	}
	lastBack := lastFinished(in.History)
	out := serversOut{}
	var parts []*groupPart
	for _, og := range withUnknownGroups(in.Observed) {
		hosts := byGroup[og.Group.Name]
		if len(hosts) == 0 {
			continue
		}
		g := newGroup(og, in.Settle[og.Group.Name], durationsFor(measured, og.Group.Name))
		parts = append(parts, prepareGroup(in, g, hosts, og.Group.Calendar(), lastBack[og.Group.Name], out))
	}
	serve(parts, out, newRolloutCap(in.Observed.Rollout, in.Now, parts, in.Observed.DrainStarts))
	for _, gp := range parts {
		g := gp.group
		g.Hosts = gp.hosts()
		for _, h := range g.Hosts {
			if h.Finish.IsZero() {
				p.Unestimated++
				continue
			}
			g.Finish = later(g.Finish, h.Finish)
		}
		p.Finish = later(p.Finish, g.Finish)
		p.Groups = append(p.Groups, g)
	}
	return p
}

// serve serves the groups' queues together: of each group's next host, the
// one that starts soonest starts first (first come, first served among equal
// starts), so that a start that takes a server cluster's host out is known
// before another group's host of that cluster is estimated.
//
// The rollout budget (rc, nil: none) holds the start chosen until it lets one
// more host start; the group then looks again from that time (its window may
// have closed meanwhile).
func serve(parts []*groupPart, out serversOut, rc *rolloutCap) {
	type next struct {
		i     int
		start time.Time
	}
	cand, known := make([]next, len(parts)), make([]bool, len(parts))
	before := func(a, b int) bool {
		ca, cb := cand[a], cand[b]
		if !ca.start.Equal(cb.start) {
			return ca.start.Before(cb.start)
		}
		return fifo(parts[a].sim.queue[ca.i], parts[b].sim.queue[cb.i]) < 0
	}
	for {
		best := -1
		for g, gp := range parts {
			s := gp.sim
			if s.left == 0 {
				continue
			}
			if !known[g] {
				i, start, why := s.candidate(out)
				if i < 0 {
					s.fail(why)
					continue
				}
				cand[g], known[g] = next{i, start}, true
			}
			if best < 0 || before(g, best) {
				best = g
			}
		}
		if best < 0 {
			return
		}
		if rc != nil {
			at, ok := rc.earliest(cand[best].start)
			if !ok {
				parts[best].sim.fail("the rollout's max_out holds it, and no host out is known to come back")
				known[best] = false
				continue
			}
			if at.After(cand[best].start) {
				parts[best].sim.t, known[best] = at, false // no host of the group starts before
				continue
			}
		}
		taken := parts[best].sim.queue[cand[best].i].Clusters
		parts[best].sim.take(cand[best].i, cand[best].start, out)
		if rc != nil {
			h := parts[best].sim.hosts[cand[best].i]
			rc.take(h.Start, h.Finish)
		}
		known[best] = false
		for g, gp := range parts { // their next host may wait for the one taken now
			if known[g] && sharesCluster(gp.sim.queue[cand[g].i].Clusters, taken) {
				known[g] = false
			}
		}
	}
}

// withUnknownGroups adds to the observed groups a group of no slot for each
// group that a host names and the policy does not have (the group of a host
// out of service since before a policy change): its hosts are still shown.
func withUnknownGroups(o Observed) []ObservedGroup {
	out := slices.Clone(o.Groups)
	known := map[string]bool{}
	for _, g := range out {
		known[g.Group.Name] = true
	}
	for _, h := range o.Hosts {
		if !known[h.Group] {
			known[h.Group] = true
			out = append(out, ObservedGroup{GroupStatus: policy.GroupStatus{Group: policy.Group{Name: h.Group}}, Limit: -1})
		}
	}
	return out
}

func newGroup(og ObservedGroup, settle time.Duration, d Durations) Group {
	capacity := og.Slots
	if og.Limit >= 0 {
		capacity = min(capacity, og.Limit-og.Unavailable)
	}
	return Group{
		Name: og.Group.Name, Size: og.Size, Concurrency: og.Group.Concurrency, Slots: og.Slots,
		Capacity: max(capacity, 0), Active: og.Active, Unavailable: og.Unavailable, Hold: og.Hold,
		Windows: og.Group.Schedule.String(), Settle: settle, Durations: d,
	}
}

// lastFinished returns, by group, when its last recorded cycle ended.
func lastFinished(history []store.HistoryRecord) map[string]time.Time {
	out := map[string]time.Time{}
	for _, h := range history {
		out[h.Group] = later(out[h.Group], h.Finished)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fifo orders waiting hosts as admission does: first come, first served, by the
// time of the request, then the host's name (policy.Admit).
func fifo(a, b ObservedHost) int {
	if c := a.Plan.RequestedAt.Compare(b.Plan.RequestedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Host, b.Host)
}

// groupPart is one group's hosts while the groups are estimated: those in
// progress and those held, estimated alone, and the queue, served by sim
// (its hosts).
type groupPart struct {
	group        Group
	active, held []Host
	sim          *sim
}

// hostOf is the part of ph's Host that the observation gives.
func hostOf(ph ObservedHost, group string) Host {
	return Host{Host: ph.Host, Group: group, Phase: ph.Plan.Phase, Starts: ph.Starts,
		WaitKind: ph.Waiting.Kind.Name(), Reason: ph.Waiting.String(), Need: ph.Plan.Reason, Cordon: ph.Cordon, Canary: ph.Canary}
}

// prepareGroup estimates the group's hosts in progress (they end one cycle
// after they started, and count out of their server clusters in out) and
// sets the queue up for serve.
func prepareGroup(in Input, g Group, hosts []ObservedHost, sched policy.Calendar, lastBack time.Time, out serversOut) *groupPart {
	gp := &groupPart{group: g}
	var outs []time.Time // when each host out of service comes back (zero: never known)
	var queue []ObservedHost
	for _, ph := range hosts {
		h := hostOf(ph, g.Name)
		if ph.Waiting.Kind == phase.WaitHostPaused {
			// A host pause with an end holds the host until then (zero: until
			// it is resumed, which nothing foresees).
			ph.NotBefore = later(ph.NotBefore, in.Observed.HostPauses[ph.Host].Until)
		}
		switch {
		case ph.Plan.Active():
			h.Start, h.Finish, h.NoEstimate = inProgress(ph.Plan, g.Durations, in.Now)
			outs = append(outs, h.Finish)
			out.add(ph.Clusters, time.Time{}, h.Finish)
			gp.active = append(gp.active, h)
		case ph.HoldsSlot:
			// Awaiting approval, it keeps a slot until it is approved, which
			// nothing foresees: a host out whose return is not known.
			h.Blocked, h.NoEstimate = true, "awaits approval, keeping its group's slot"
			outs = append(outs, time.Time{})
			gp.held = append(gp.held, h)
		case ph.Starts || timed(ph.Waiting.Kind) || !ph.NotBefore.IsZero() || ph.Waiting.Kind == phase.WaitCanary:
			queue = append(queue, ph)
		case ph.Waiting.Kind == phase.WaitHalted:
			h.Blocked, h.NoEstimate = true, "halted: it will not start until the halt is lifted (rollboot resume)"
			gp.held = append(gp.held, h)
		default:
			h.Blocked, h.NoEstimate = true, "held by something that does not end with time"
			gp.held = append(gp.held, h)
		}
	}
	slices.SortFunc(gp.active, func(a, b Host) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Host, b.Host)) })
	slices.SortFunc(queue, fifo)
	afterCanaries(queue, outs, in.CanarySoak[g.Name])
	gp.sim = &sim{now: in.Now, cycle: g.Durations.Cycle(), capacity: g.Capacity, settle: g.Settle,
		sched: sched, deadline: in.DrainDeadline, outs: outs, lastBack: lastBack}
	if in.Observed.Paused {
		gp.sim.notBefore = in.Observed.PausedUntil // a pause with an end: no start before it
	}
	if p, ok := in.Observed.GroupPauses[g.Name]; ok {
		gp.sim.notBefore = later(gp.sim.notBefore, p.Until)
	}
	if d, ok := in.GroupDrainDeadlines[g.Name]; ok {
		gp.sim.deadline = d
	}
	gp.sim.begin(queue, g.Name)
	return gp
}

// afterCanaries sets when the hosts that wait for their wave's canaries may
// start: once the last host out of the group (the canaries) is back and the
// soak has passed. A canary that never comes back on its own (stuck) leaves
// them without an estimate.
func afterCanaries(queue []ObservedHost, outs []time.Time, soak time.Duration) {
	var back time.Time
	for _, t := range outs {
		if t.IsZero() {
			back = time.Time{}
			break
		}
		back = later(back, t)
	}
	for i, ph := range queue {
		if ph.Waiting.Kind == phase.WaitCanary && !back.IsZero() {
			queue[i].NotBefore = back.Add(soak)
		}
	}
}

// hosts returns the group's hosts once served: in progress first, then the
// queue in the order the hosts are expected to start (a host in backoff, or
// waiting for its server cluster, may go after later requests; those without
// an estimate last, first come, first served), then those held.
func (gp *groupPart) hosts() []Host {
	queued := gp.sim.hosts
	slices.SortStableFunc(queued, func(a, b Host) int {
		if a.Start.IsZero() || b.Start.IsZero() {
			return cmp.Compare(zeroLast(a.Start), zeroLast(b.Start))
		}
		return a.Start.Compare(b.Start)
	})
	for i := range queued {
		queued[i].Position = i + 1
	}
	return slices.Concat(gp.active, queued, gp.held)
}

func zeroLast(t time.Time) int {
	if t.IsZero() {
		return 1
	}
	return 0
}

// inProgress estimates when a host out of service comes back: the phase it is
// in started when its plan says, and lasts the group's median (a host held by
// its agent, from now). It is never estimated before now. A stuck host, or one
// whose plan cannot be read, has no estimate: it keeps its slot until released.
func inProgress(p store.Plan, d Durations, now time.Time) (start, finish time.Time, why string) {
	start = p.Timeline[store.PhaseDraining]
	var from time.Time
	var left time.Duration
	switch p.Phase {
	case store.PhaseDraining:
		from, left = p.Timeline[store.PhaseDraining], d.Cycle()
	case store.PhaseDrained, store.PhaseRebooting:
		from, left = p.Timeline[store.PhaseDrained], d.Reboot+d.Rejoin
		if p.Held {
			from = now
		}
	case store.PhaseRejoining:
		from, left = p.Timeline[store.PhaseRejoining], d.Rejoin
	default:
		return start, time.Time{}, "keeps its slot until it is released or comes back"
	}
	if from.IsZero() {
		from = p.PhaseSince
	}
	return start, later(now, from.Add(left)), ""
}

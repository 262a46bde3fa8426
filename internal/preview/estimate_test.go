package preview

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// now is a Monday, 12:00 UTC.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return now.Add(d) }

const m = time.Minute

// daily is a window open every day from start to end (UTC).
func daily(start, end time.Duration) policy.Schedule {
	all := []time.Weekday{0, 1, 2, 3, 4, 5, 6}
	return policy.Schedule{{Name: "nightly", Days: all, Start: start, End: end}}
}

// group is an observed group of size nodes.
func group(name string, concurrency, size int, sched policy.Schedule) ObservedGroup {
	g := policy.Group{Name: name, Concurrency: concurrency, Schedule: sched}
	return ObservedGroup{GroupStatus: policy.GroupStatus{Group: g, Size: size},
		Slots: policy.Slots(g, size), Limit: -1}
}

// frozen adds freezes to an observed group.
func frozen(g ObservedGroup, fs ...policy.Freeze) ObservedGroup {
	g.Group.Freezes = fs
	return g
}

// pending is a host that asked at now+asked and waits for its slot.
func pending(name, group string, asked time.Duration) ObservedHost {
	return ObservedHost{Host: name, Group: group,
		Plan:    store.Plan{Host: name, Phase: store.PhasePending, RequestedAt: at(asked)},
		Waiting: phase.WaitReason{Kind: phase.WaitGroupBudget, Detail: "group is full"}}
}

// awaitingApproval makes h a host awaiting approval that keeps its slot.
func awaitingApproval(h ObservedHost) ObservedHost {
	h.Waiting = phase.WaitFor(phase.WaitAwaitingApproval, "run `rollboot approve "+h.Host+"`")
	h.HoldsSlot = true
	return h
}

// urgent makes h an urgent request (`rollboot request -urgent`).
func urgent(h ObservedHost) ObservedHost {
	h.Urgent = true
	return h
}

// hostPaused makes h a host that an operator paused by itself (the pause
// itself goes in the case's pauses).
func hostPaused(h ObservedHost) ObservedHost {
	h.Waiting = phase.WaitFor(phase.WaitHostPaused, "paused by carol: debugging")
	return h
}

func starts(h ObservedHost) ObservedHost {
	h.Starts, h.Waiting = true, phase.WaitReason{}
	return h
}

func backoff(h ObservedHost, until time.Duration) ObservedHost {
	h.Plan.Phase, h.Plan.NextTry = store.PhaseBackoff, at(until)
	h.Waiting = phase.WaitReason{Kind: phase.WaitBackoff, Detail: at(until).Format(time.RFC3339)}
	return h
}

// server makes h a host that runs a server of each of clusters.
func server(h ObservedHost, clusters ...string) ObservedHost {
	h.Clusters = clusters
	return h
}

// serverOut is a pending host held because the host other, of its cluster, is
// out (or taken out in the same pass).
func serverOut(h ObservedHost, other string) ObservedHost {
	h.Waiting = phase.WaitReason{Kind: phase.WaitServerOut, Detail: "nomad server of global on " + other}
	return h
}

// active is a host in phase since now+since (draining since then, for the
// later phases).
func active(name, group, phase string, since time.Duration) ObservedHost {
	tl := map[string]time.Time{store.PhaseDraining: at(since), phase: at(since)}
	return ObservedHost{Host: name, Group: group,
		Plan: store.Plan{Host: name, Phase: phase, PhaseSince: at(since), Timeline: tl}}
}

// cycle is a history record of a cycle in group that ended at now+end, with
// the given step durations.
func cycle(group string, end, drain, reboot, rejoin time.Duration) store.HistoryRecord {
	fin := at(end)
	return store.HistoryRecord{Host: "old", Group: group, Outcome: "rebooted", Finished: fin,
		Timeline: map[string]time.Time{
			store.PhaseRejoining: fin.Add(-rejoin),
			store.PhaseDrained:   fin.Add(-rejoin - reboot),
			store.PhaseDraining:  fin.Add(-rejoin - reboot - drain),
		}}
}

// est renders each host's estimate as "host start-finish" in minutes from now
// ("-" for none), in plan order.
func est(p Plan) string {
	var out []string
	for _, g := range p.Groups {
		for _, h := range g.Hosts {
			s := h.Host + " "
			if h.Start.IsZero() {
				s += "-"
			} else {
				s += fmt.Sprint(int64(h.Start.Sub(now) / m))
			}
			s += "/"
			if h.Finish.IsZero() {
				s += "-"
			} else {
				s += fmt.Sprint(int64(h.Finish.Sub(now) / m))
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

func TestBuildEstimates(t *testing.T) {
	always := policy.Schedule(nil)
	def := DefaultDurations.Cycle() / m // 6 minutes
	tests := []struct {
		name      string
		groups    []ObservedGroup
		hosts     []ObservedHost
		history   []store.HistoryRecord
		settle    map[string]time.Duration
		deadline  time.Duration
		deadlines map[string]time.Duration
		pauses    map[string]store.Pause // the hosts' own pauses
		want      string                 // est(plan)
		finish    time.Duration
		unest     int
	}{{
		name:   "no history: the defaults, one at a time, first come first served",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{pending("b", "web", -2*m), starts(pending("a", "web", -3*m)), pending("c", "web", -1*m)},
		want:   fmt.Sprintf("a 0/%d, b %d/%d, c %d/%d", def, def, 2*def, 2*def, 3*def),
		finish: 3 * def * m,
	}, {
		name:   "concurrency 2",
		groups: []ObservedGroup{group("web", 2, 3, always)},
		hosts:  []ObservedHost{starts(pending("a", "web", -3*m)), starts(pending("b", "web", -2*m)), pending("c", "web", -1*m)},
		want:   "a 0/6, b 0/6, c 6/12",
		finish: 12 * m,
	}, {
		name:    "the group's own history: medians of drain, reboot and rejoin",
		groups:  []ObservedGroup{group("web", 1, 3, always)},
		hosts:   []ObservedHost{starts(pending("a", "web", -3*m)), pending("b", "web", -2*m)},
		history: []store.HistoryRecord{cycle("web", -60*m, 1*m, 2*m, 1*m), cycle("web", -50*m, 3*m, 4*m, 1*m), cycle("web", -40*m, 5*m, 6*m, 3*m), cycle("db", -30*m, 30*m, 30*m, 30*m)},
		want:    "a 0/8, b 8/16", // drain 3m, reboot 4m, rejoin 1m
		finish:  16 * m,
	}, {
		name:    "no history for the group: every group's medians",
		groups:  []ObservedGroup{group("web", 1, 3, always)},
		hosts:   []ObservedHost{starts(pending("a", "web", -3*m))},
		history: []store.HistoryRecord{cycle("db", -30*m, 10*m, 10*m, 10*m)},
		want:    "a 0/30",
		finish:  30 * m,
	}, {
		name:     "window closed: the first host waits for its opening at 22:00",
		groups:   []ObservedGroup{group("web", 1, 3, daily(22*time.Hour, 23*time.Hour))},
		hosts:    []ObservedHost{pending("a", "web", -3*m), pending("b", "web", -2*m)},
		deadline: 30 * m,
		want:     "a 600/606, b 606/612",
		finish:   612 * m,
	}, {
		name: "frozen: the first host starts when the freeze ends at 14:00",
		groups: []ObservedGroup{frozen(group("web", 1, 3, always), policy.Freeze{Name: "release",
			From: policy.Date{Year: 2026, Month: 11, Day: 30, Clock: 10 * time.Hour, HasClock: true},
			To:   policy.Date{Year: 2026, Month: 11, Day: 30, Clock: 14 * time.Hour, HasClock: true}})},
		hosts:  []ObservedHost{pending("a", "web", -3*m), pending("b", "web", -2*m)},
		want:   "a 120/126, b 126/132",
		finish: 132 * m,
	}, {
		name: "frozen, an urgent request: it skips the freeze, ahead of the line",
		groups: []ObservedGroup{frozen(group("web", 1, 3, always), policy.Freeze{Name: "release",
			From: policy.Date{Year: 2026, Month: 11, Day: 30, Clock: 10 * time.Hour, HasClock: true},
			To:   policy.Date{Year: 2026, Month: 11, Day: 30, Clock: 14 * time.Hour, HasClock: true}})},
		hosts:  []ObservedHost{pending("a", "web", -3*m), urgent(pending("b", "web", -2*m)), urgent(pending("c", "web", -1*m))},
		want:   "b 0/6, c 6/12, a 120/126",
		finish: 126 * m,
	}, {
		name:     "window closed, an urgent request: it starts now; the others at 22:00",
		groups:   []ObservedGroup{group("web", 1, 3, daily(22*time.Hour, 23*time.Hour))},
		hosts:    []ObservedHost{pending("a", "web", -3*m), urgent(pending("b", "web", -2*m))},
		deadline: 30 * m,
		want:     "b 0/6, a 600/606",
		finish:   606 * m,
	}, {
		name:   "window open, an urgent request: in its turn, first come first served",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{starts(pending("a", "web", -3*m)), urgent(pending("b", "web", -2*m))},
		want:   "a 0/6, b 6/12",
		finish: 12 * m,
	}, {
		name:     "an urgent request still waits for its slot and the settle time",
		groups:   []ObservedGroup{group("web", 1, 3, daily(22*time.Hour, 23*time.Hour))},
		hosts:    []ObservedHost{active("x", "web", store.PhaseDraining, -2*m), urgent(pending("b", "web", -2*m))},
		settle:   map[string]time.Duration{"web": 10 * m},
		deadline: 30 * m,
		want:     "x -2/4, b 14/20",
		finish:   20 * m,
	}, {
		name:   "a host paused until 13:00: it starts then, the next in line first",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{hostPaused(pending("a", "web", -3*m)), starts(pending("b", "web", -2*m))},
		pauses: map[string]store.Pause{"a": {Until: at(60 * m), Reason: "debugging"}},
		want:   "b 0/6, a 60/66",
		finish: 66 * m,
	}, {
		name:   "a host paused with no end: no estimate",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{hostPaused(pending("a", "web", -3*m)), starts(pending("b", "web", -2*m))},
		pauses: map[string]store.Pause{"a": {Reason: "debugging"}},
		want:   "b 0/6, a -/-",
		finish: 6 * m,
		unest:  1,
	}, {
		name:     "a window that closes before the drain deadline: the next opening",
		groups:   []ObservedGroup{group("web", 1, 3, daily(11*time.Hour+50*m, 12*time.Hour+20*m))},
		hosts:    []ObservedHost{pending("a", "web", -3*m)},
		deadline: 30 * m,
		want:     "a 1430/1436", // tomorrow 11:50
		finish:   1436 * m,
	}, {
		name:     "the fifth host waits for the next night",
		groups:   []ObservedGroup{group("web", 1, 9, daily(12*time.Hour, 12*time.Hour+40*m))},
		hosts:    []ObservedHost{starts(pending("a", "web", -9*m)), pending("b", "web", -8*m), pending("c", "web", -7*m), pending("d", "web", -6*m), pending("e", "web", -5*m)},
		deadline: 20 * m,
		want:     "a 0/6, b 6/12, c 12/18, d 18/24, e 1440/1446",
		finish:   1446 * m,
	}, {
		name:      "a group's own drain deadline: the fourth host waits for the next night",
		groups:    []ObservedGroup{group("web", 1, 9, daily(12*time.Hour, 12*time.Hour+40*m))},
		hosts:     []ObservedHost{starts(pending("a", "web", -9*m)), pending("b", "web", -8*m), pending("c", "web", -7*m), pending("d", "web", -6*m)},
		deadline:  20 * m,
		deadlines: map[string]time.Duration{"web": 25 * m},
		want:      "a 0/6, b 6/12, c 12/18, d 1440/1446",
		finish:    1446 * m,
	}, {
		name:   "settle between one host coming back and the next starting",
		groups: []ObservedGroup{group("web", 2, 3, always)},
		hosts:  []ObservedHost{starts(pending("a", "web", -3*m)), starts(pending("b", "web", -2*m)), pending("c", "web", -1*m)},
		settle: map[string]time.Duration{"web": 10 * m},
		want:   "a 0/6, b 0/6, c 16/22",
		finish: 22 * m,
	}, {
		name:    "settle counts from the last cycle in history",
		groups:  []ObservedGroup{group("web", 1, 3, always)},
		hosts:   []ObservedHost{pending("a", "web", -3*m)},
		history: []store.HistoryRecord{cycle("web", -4*m, 2*m, 3*m, 1*m)},
		settle:  map[string]time.Duration{"web": 10 * m},
		want:    "a 6/12",
		finish:  12 * m,
	}, {
		name:   "a host in progress keeps its slot for the rest of its cycle",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{active("x", "web", store.PhaseDraining, -1*m), pending("a", "web", -3*m)},
		want:   "x -1/5, a 5/11",
		finish: 11 * m,
	}, {
		name:   "a host rejoining comes back one rejoin after it started to",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{active("x", "web", store.PhaseRejoining, -30*m), pending("a", "web", -3*m)},
		want:   "x -30/0, a 0/6",
		finish: 6 * m,
	}, {
		name:   "a stuck host keeps the only slot: no estimate behind it",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{active("x", "web", store.PhaseStuck, -30*m), pending("a", "web", -3*m)},
		want:   "x -30/-, a -/-",
		unest:  2,
	}, {
		name:   "a host awaiting approval keeps the only slot: no estimate behind it",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{awaitingApproval(pending("a", "web", -3*m)), pending("b", "web", -2*m)},
		want:   "b -/-, a -/-",
		unest:  2,
	}, {
		name:   "a host awaiting approval takes one of two slots: the line goes on in the other",
		groups: []ObservedGroup{group("web", 2, 3, always)},
		hosts:  []ObservedHost{awaitingApproval(pending("a", "web", -3*m)), starts(pending("b", "web", -2*m)), pending("c", "web", -1*m)},
		want:   "b 0/6, c 6/12, a -/-",
		finish: 12 * m,
		unest:  1,
	}, {
		name:   "a backoff that ends before the next start goes first",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts: []ObservedHost{active("x", "web", store.PhaseDraining, -1*m),
			backoff(pending("a", "web", -10*m), 2*m), pending("b", "web", -3*m)},
		want:   "x -1/5, a 5/11, b 11/17",
		finish: 17 * m,
	}, {
		name:   "a backoff that ends later lets the queue go on",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{backoff(pending("a", "web", -10*m), 3*m), starts(pending("b", "web", -3*m))},
		want:   "b 0/6, a 6/12",
		finish: 12 * m,
	}, {
		name:   "held by what time does not end: blocked, no estimate, out of the queue",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts: []ObservedHost{
			{Host: "a", Group: "web", Plan: store.Plan{Host: "a", Phase: store.PhasePending, RequestedAt: at(-9 * m)},
				Waiting: phase.WaitReason{Kind: phase.WaitAgentMissing, Detail: "no allocation"}},
			starts(pending("b", "web", -3*m))},
		want:   "b 0/6, a -/-",
		finish: 6 * m,
		unest:  1,
	}, {
		name: "max_unavailable used up by unavailable nodes: nothing can start",
		groups: []ObservedGroup{func() ObservedGroup {
			g := group("web", 2, 4, always)
			g.Group.MaxUnavailablePct, g.Limit, g.Unavailable = 25, 1, 1
			return g
		}()},
		hosts: []ObservedHost{pending("a", "web", -3*m)},
		want:  "a -/-",
		unest: 1,
	}, {
		name:   "a host of a group the policy no longer has is still shown",
		groups: []ObservedGroup{group("web", 1, 3, always)},
		hosts:  []ObservedHost{active("x", "old", store.PhaseRejoining, -1*m), pending("a", "old", -3*m)},
		want:   "x -1/0, a -/-",
		finish: 0,
		unest:  1,
	}, {
		name:   "a cluster's servers in two groups go out one after the other",
		groups: []ObservedGroup{group("web", 1, 3, always), group("db", 1, 3, always)},
		hosts: []ObservedHost{server(starts(pending("a", "web", -3*m)), "nomad/global"),
			server(serverOut(pending("b", "db", -2*m), "a"), "nomad/global"), server(pending("c", "db", -1*m), "nomad/global")},
		want:   "a 0/6, b 6/12, c 12/18",
		finish: 18 * m,
	}, {
		name:   "a server waiting for its cluster lets the next host in line take the slot",
		groups: []ObservedGroup{group("srv", 2, 4, always)},
		hosts: []ObservedHost{server(starts(pending("a", "srv", -3*m)), "nomad/global"),
			server(serverOut(pending("b", "srv", -2*m), "a"), "nomad/global"), starts(pending("c", "srv", -1*m)), pending("d", "srv", 0)},
		want:   "a 0/6, c 0/6, b 6/12, d 6/12",
		finish: 12 * m,
	}, {
		name:   "a server waits for its cluster's host in progress in another group",
		groups: []ObservedGroup{group("web", 1, 3, always), group("db", 1, 3, always)},
		hosts: []ObservedHost{server(active("x", "web", store.PhaseDraining, -1*m), "consul/dc1"),
			server(serverOut(pending("b", "db", -2*m), "x"), "consul/dc1")},
		want:   "x -1/5, b 5/11",
		finish: 11 * m,
	}, {
		name:   "a stuck server keeps its cluster out: no estimate for the others",
		groups: []ObservedGroup{group("web", 1, 3, always), group("db", 1, 3, always)},
		hosts: []ObservedHost{server(active("x", "web", store.PhaseStuck, -30*m), "consul/dc1"),
			server(serverOut(pending("b", "db", -2*m), "x"), "consul/dc1"), starts(pending("c", "db", -1*m))},
		want:   "x -30/-, c 0/6, b -/-",
		finish: 6 * m,
		unest:  2,
	}, {
		name:   "servers of other clusters go out side by side",
		groups: []ObservedGroup{group("web", 1, 3, always), group("db", 1, 3, always), group("ops", 1, 3, always)},
		hosts: []ObservedHost{server(starts(pending("a", "web", -3*m)), "nomad/global", "consul/dc1"),
			server(starts(pending("b", "db", -2*m)), "vault/v1"), server(pending("c", "ops", -1*m), "consul/dc1")},
		want:   "a 0/6, b 0/6, c 6/12",
		finish: 12 * m,
	}, {
		name:   "groups are estimated apart",
		groups: []ObservedGroup{group("web", 1, 3, always), group("db", 1, 3, always)},
		hosts:  []ObservedHost{starts(pending("a", "web", -3*m)), starts(pending("b", "db", -2*m)), pending("c", "web", -1*m)},
		want:   "a 0/6, c 6/12, b 0/6",
		finish: 12 * m,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: tc.groups, Hosts: tc.hosts, HostPauses: tc.pauses},
				DrainDeadline: tc.deadline, GroupDrainDeadlines: tc.deadlines, Settle: tc.settle, History: tc.history})
			if got := est(p); got != tc.want {
				t.Errorf("estimates: got %q, want %q", got, tc.want)
			}
			var fin time.Duration
			if !p.Finish.IsZero() {
				fin = p.Finish.Sub(now)
			}
			if fin != tc.finish || p.Unestimated != tc.unest {
				t.Errorf("rollout finish %s with %d unestimated, want %s with %d", fin, p.Unestimated, tc.finish, tc.unest)
			}
		})
	}
}

func TestMeasure(t *testing.T) {
	failed := cycle("web", -5*m, time.Hour, time.Hour, time.Hour)
	failed.Outcome = "failed"
	got := Measure([]store.HistoryRecord{
		cycle("web", -60*m, 1*m, 2*m, 1*m), cycle("web", -50*m, 3*m, 4*m, 2*m), failed,
		cycle("db", -30*m, 10*m, 10*m, 10*m),
	})
	want := map[string]Durations{
		"web": {Drain: 2 * m, Reboot: 3 * m, Rejoin: 90 * time.Second, Samples: 2, Source: SourceGroup},
		"db":  {Drain: 10 * m, Reboot: 10 * m, Rejoin: 10 * m, Samples: 1, Source: SourceGroup},
		"":    {Drain: 3 * m, Reboot: 4 * m, Rejoin: 2 * m, Samples: 3, Source: SourceAll},
	}
	for g, w := range want {
		if got[g] != w {
			t.Errorf("group %q: got %+v, want %+v", g, got[g], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d groups, want %d: %+v", len(got), len(want), got)
	}
}

// TestServersNeverOverlap: whatever the groups, queues, backoffs and hosts in
// progress, no two hosts of one server cluster are estimated out at once, and
// no group has more hosts out than its capacity.
func TestServersNeverOverlap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clusters := []string{"nomad/global", "consul/dc1", "vault/v1"}
		var groups []ObservedGroup
		var hosts []ObservedHost
		out := map[string]bool{} // clusters with a host in progress already
		for g := range rapid.IntRange(1, 4).Draw(t, "groups") {
			name := fmt.Sprintf("g%d", g)
			groups = append(groups, group(name, rapid.IntRange(1, 3).Draw(t, "concurrency"), 10, nil))
			for h := range rapid.IntRange(0, 6).Draw(t, "hosts") {
				host := pending(fmt.Sprintf("%s-%d", name, h), name, time.Duration(rapid.IntRange(-60, 0).Draw(t, "asked"))*m)
				if rapid.Bool().Draw(t, "backoff") {
					host = backoff(host, time.Duration(rapid.IntRange(1, 30).Draw(t, "until"))*m)
				}
				var cs []string
				for _, c := range clusters {
					if rapid.IntRange(0, 3).Draw(t, "server of "+c) == 0 {
						cs = append(cs, c)
					}
				}
				if h == 0 && rapid.Bool().Draw(t, "in progress") && !slices.ContainsFunc(cs, func(c string) bool { return out[c] }) {
					host = active(host.Host, name, store.PhaseDraining, -time.Duration(rapid.IntRange(0, 5).Draw(t, "since"))*m)
					for _, c := range cs {
						out[c] = true
					}
				}
				hosts = append(hosts, server(host, cs...))
			}
		}
		clustersOf := map[string][]string{}
		for _, h := range hosts {
			clustersOf[h.Host] = h.Clusters
		}
		p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: groups, Hosts: hosts}})
		var all []Host
		for _, g := range p.Groups {
			for _, h := range g.Hosts {
				if h.Start.IsZero() || h.Finish.IsZero() {
					continue
				}
				busy := 0
				for _, o := range g.Hosts {
					if !o.Start.IsZero() && !o.Finish.IsZero() && !o.Start.After(h.Start) && o.Finish.After(h.Start) {
						busy++
					}
				}
				if busy > g.Capacity {
					t.Fatalf("group %s has %d hosts out at %s, capacity %d: %s", g.Name, busy, h.Start, g.Capacity, est(p))
				}
				all = append(all, h)
			}
		}
		for i, a := range all {
			for _, b := range all[i+1:] {
				if a.Start.Before(b.Finish) && b.Start.Before(a.Finish) &&
					sharesCluster(clustersOf[a.Host], clustersOf[b.Host]) {
					t.Fatalf("%s and %s share a server cluster and are out at once: %s", a.Host, b.Host, est(p))
				}
			}
		}
	})
}

// A pause that ends by itself: no estimate starts before its end, and the
// text says until when.
func TestPausedUntilEstimates(t *testing.T) {
	paused := func(h ObservedHost) ObservedHost {
		h.Waiting = phase.WaitReason{Kind: phase.WaitPaused}
		return h
	}
	obs := Observed{Now: now, Paused: true, PauseReason: "incident", PausedUntil: now.Add(90 * m),
		Groups: []ObservedGroup{group("web", 1, 3, nil)},
		Hosts:  []ObservedHost{paused(pending("a", "web", -3*m)), paused(pending("b", "web", -2*m))}}
	p := Build(Input{Now: now, Observed: obs})
	if got := est(p); got != "a 90/96, b 96/102" {
		t.Errorf("estimates %s, want a 90/96, b 96/102", got)
	}
	var b strings.Builder
	if err := WriteText(&b, Report{Plan: p}); err != nil || !strings.Contains(b.String(), "Paused (incident) until "+now.Add(90*m).Format(time.RFC3339)) {
		t.Errorf("the plan does not say until when it is paused (%v):\n%s", err, b.String())
	}
}

// A group paused with an end starts no estimate before that end; the other
// groups are not held by it.
func TestGroupPausedUntilEstimates(t *testing.T) {
	obs := Observed{Now: now,
		GroupPauses: map[string]store.Pause{"web": {Until: now.Add(60 * m), Reason: "deploy"}},
		Groups:      []ObservedGroup{group("web", 1, 3, nil), group("db", 1, 3, nil)},
		Hosts:       []ObservedHost{pending("a", "web", -3*m), pending("b", "db", -2*m)}}
	if got := est(Build(Input{Now: now, Observed: obs})); got != "b 0/6, a 60/66" && got != "a 60/66, b 0/6" {
		t.Errorf("estimates %s, want a 60/66 and b 0/6", got)
	}
}

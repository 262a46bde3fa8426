package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// With several rollouts at a host count, each has its own rows, named by its
// number, shown for information; the goal is judged on their mean.
func TestMakespanMeanJudged(t *testing.T) {
	rollout := func(run int, makespan time.Duration) *Rollout {
		return &Rollout{Hosts: 1000, Groups: 10, Concurrency: 5, Run: run, Runs: 2, Completed: true,
			Makespan: makespan, LowerBound: 100 * time.Second, SentinelToPend: []time.Duration{time.Millisecond},
			Cycles: make([]time.Duration, 1000), Requests: 20000}
	}
	for _, tt := range []struct {
		name          string
		first, second time.Duration
		failed        bool
	}{
		{"both under", 103 * time.Second, 104 * time.Second, false},
		{"one over, the mean under", 103 * time.Second, 106 * time.Second, false},
		{"the mean over", 104 * time.Second, 107 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Rollouts: []*Rollout{rollout(1, tt.first), rollout(2, tt.second)}}
			var labels, means []string
			for _, row := range rep.Rows() {
				switch row.Figure {
				case "makespan / lower bound":
					labels = append(labels, row.Hosts)
					if row.Verdict != "info" {
						t.Errorf("rollout %s judged %s on its own, want info", row.Hosts, row.Verdict)
					}
				case "makespan / lower bound, mean of 2 rollouts":
					means = append(means, row.Hosts+": "+row.Value+", "+row.Verdict)
				}
			}
			if len(labels) != 2 || labels[0] != "1000 (1/2)" || labels[1] != "1000 (2/2)" {
				t.Errorf("makespan rows for %q, want one per rollout, numbered", labels)
			}
			if len(means) != 1 {
				t.Errorf("mean rows %q, want one", means)
			}
			if got := rep.Failed(); got != tt.failed {
				t.Errorf("failed %t, want %t (%q)", got, tt.failed, means)
			}
		})
	}
	one := &Rollout{Hosts: 1000, Run: 1, Runs: 1}
	if got := one.Label(); got != "1000" {
		t.Errorf("a single rollout is labelled %q, want its host count", got)
	}
	if got := (&Rollout{Hosts: 5000, Latency: 50 * time.Millisecond, Run: 2, Runs: 3}).Label(); got != "5000 at 50ms (2/3)" {
		t.Errorf("a rollout at a latency is labelled %q", got)
	}
}

// The means are taken per host count and latency, in the order the rollouts
// ran.
func TestMakespanMeans(t *testing.T) {
	r := func(hosts int, latency time.Duration, ratio float64) *Rollout {
		return &Rollout{Hosts: hosts, Latency: latency, LowerBound: 100 * time.Second, Makespan: time.Duration(ratio * 100 * float64(time.Second))}
	}
	got := makespanMeans([]*Rollout{
		r(1000, 0, 1.02), r(1000, 0, 1.04), r(1000, 50*time.Millisecond, 1.30), r(1000, 0, 1.06), r(5000, 0, 1.08),
		{Hosts: 5000}, // no cycle measured
	})
	want := []struct {
		hosts        int
		latency      time.Duration
		n            int
		mean, lo, hi float64
	}{
		{1000, 0, 3, 1.04, 1.02, 1.06},
		{1000, 50 * time.Millisecond, 1, 1.30, 1.30, 1.30},
		{5000, 0, 2, 0.54, 0, 1.08},
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups %+v, want %d", len(got), got, len(want))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for i, w := range want {
		g := got[i]
		if g.Hosts != w.hosts || g.Latency != w.latency || len(g.Ratios) != w.n || !near(g.Mean, w.mean) || !near(g.Min, w.lo) || !near(g.Max, w.hi) {
			t.Errorf("group %d: %+v, want %+v", i, g, w)
		}
	}
	// The 5,000-host group has a rollout without cycles: it fails its goal.
	rep := &Report{Rollouts: []*Rollout{{Hosts: 5000, Runs: 2, LowerBound: 100 * time.Second, Makespan: 101 * time.Second}, {Hosts: 5000, Runs: 2}}}
	if rows := makespanMeanRows(rep); len(rows) != 1 || rows[0].Verdict != "FAIL" {
		t.Errorf("a group with a rollout that measured nothing: %+v, want FAIL", rows)
	}
}

// The makespan goal: 1.05 from 1,000 hosts, 1.10 from 5,000, with no request
// latency; for information elsewhere.
func TestMakespanGoal(t *testing.T) {
	for _, tt := range []struct {
		hosts    int
		latency  time.Duration
		limit    float64
		rollouts int
		judged   bool
	}{
		{100, 0, 0, 0, false},
		{1000, 0, 1.05, 5, true},
		{2000, 0, 1.05, 5, true},
		{5000, 0, 1.10, 3, true},
		{1000, 10 * time.Millisecond, 0, 0, false},
		{5000, 50 * time.Millisecond, 0, 0, false},
	} {
		limit, rollouts, judged := makespanGoal(tt.hosts, tt.latency)
		if limit != tt.limit || rollouts != tt.rollouts || judged != tt.judged {
			t.Errorf("makespanGoal(%d, %s) = %.2f, %d, %t; want %.2f, %d, %t", tt.hosts, tt.latency, limit, rollouts, judged, tt.limit, tt.rollouts, tt.judged)
		}
	}
}

// A latency figure is judged against its goal with no latency, and against
// the goal at 50 ms from 5,000 hosts; elsewhere it is shown, and the goal
// column says where the goals are set.
func TestLatencyGoals(t *testing.T) {
	ms50 := 50 * time.Millisecond
	for _, tt := range []struct {
		name    string
		g       latencyGoals
		hosts   int
		latency time.Duration
		goal    string
		limit   time.Duration
		judged  bool
	}{
		{"hand-off, no latency", handOffGoals, 1000, 0, "<= 500ms", 500 * time.Millisecond, true},
		{"hand-off, 50ms at 5000", handOffGoals, 5000, ms50, "<= 1s", time.Second, true},
		{"hand-off, 50ms at 1000", handOffGoals, 1000, ms50, "<= 500ms with no latency, <= 1s at 50ms and 5000 hosts", 0, false},
		{"hand-off, 10ms at 5000", handOffGoals, 5000, 10 * time.Millisecond, "<= 500ms with no latency, <= 1s at 50ms and 5000 hosts", 0, false},
		{"sentinel, no latency", sentinelGoals, 100, 0, "<= 1s", time.Second, true},
		{"sentinel, 50ms at 5000", sentinelGoals, 5000, ms50, "<= 1s with no latency", 0, false},
		{"fail-over, no latency", failoverGoals, 5000, 0, "<= 5s at 50ms and 5000 hosts", 0, false},
		{"fail-over, 50ms at 5000", failoverGoals, 5000, ms50, "<= 5s", 5 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			goal, limit, judged := tt.g.at(tt.hosts, tt.latency)
			if goal != tt.goal || limit != tt.limit || judged != tt.judged {
				t.Errorf("got %q, %s, %t; want %q, %s, %t", goal, limit, judged, tt.goal, tt.limit, tt.judged)
			}
		})
	}
}

// Nomad requests per rebooted host: every rollboot request of the rollout
// over the hosts it rebooted, judged at every host count and latency.
func TestRequestRows(t *testing.T) {
	cycles := func(n int) []time.Duration { return make([]time.Duration, n) }
	for _, tt := range []struct {
		name     string
		r        Rollout
		per      float64
		verdict  string
		contains string
	}{
		{"under", Rollout{Hosts: 100, Requests: 2000, Cycles: cycles(100)}, 20, "pass", "20.0: coordinator 20.0, agents 0.0 (2000 requests, 100 hosts rebooted"},
		{"by process", Rollout{Hosts: 100, Requests: 2000, Cycles: cycles(100), Emulator: nomadsim.RequestStats{Routes: []nomadsim.RouteStats{
			{Route: "GET /v1/var/...", Requests: 1500, Local: 600}, {Route: "GET /v1/nodes", Requests: 500, Local: 100}}}},
			20, "pass", "20.0: coordinator 13.0, agents 7.0"},
		{"at the goal", Rollout{Hosts: 1000, Requests: 25000, Cycles: cycles(1000)}, 25, "pass", "25.0"},
		{"over, at a latency", Rollout{Hosts: 5000, Latency: 50 * time.Millisecond, Requests: 130000, Cycles: cycles(5000)}, 26, "FAIL", "26.0"},
		{"per rebooted host, not per host", Rollout{Hosts: 100, Requests: 1000, Cycles: cycles(50)}, 20, "pass", "50 hosts rebooted"},
		{"none rebooted", Rollout{Hosts: 100, Requests: 1000}, 0, "FAIL", "none rebooted"},
		{"idle watches renewed, left out", Rollout{Hosts: 100, Requests: 2700, Renewals: 200, Cycles: cycles(100), Emulator: nomadsim.RequestStats{
			RanOut: 200, Routes: []nomadsim.RouteStats{{Route: "GET /v1/var/...", Requests: 2700, Local: 1500, RanOut: 200, LocalRanOut: 150}}}},
			25, "pass", "25.0: coordinator 11.5, agents 13.5 (2500 requests and 200 more that renewed idle watches, 100 hosts rebooted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := requestsPerHost(&tt.r); math.Abs(got-tt.per) > 1e-9 {
				t.Errorf("requestsPerHost = %.2f, want %.2f", got, tt.per)
			}
			rows := requestRows(&tt.r)
			if len(rows) != 1 || rows[0].Verdict != tt.verdict || rows[0].Goal != "<= 25" || !strings.Contains(rows[0].Value, tt.contains) {
				t.Errorf("rows %+v, want verdict %s, goal <= 25, a value with %q", rows, tt.verdict, tt.contains)
			}
		})
	}
}

// The routes by requests, most first, each per rebooted host; the rest
// summed.
func TestRouteShares(t *testing.T) {
	routes := []nomadsim.RouteStats{ // as the emulator sorts them: busiest first
		{Route: "GET /v1/vars", Requests: 300, Busy: 3 * time.Second},
		{Route: "GET /v1/var/...", Requests: 1000, Local: 400, Busy: time.Second},
		{Route: "PUT /v1/var/...", Requests: 1000, Busy: time.Second},
		{Route: "GET /v1/node/:id/allocations", Requests: 50, Busy: 100 * time.Millisecond},
		{Route: "GET /v1/nodes", Requests: 10, Busy: 10 * time.Millisecond},
	}
	shares, other := routeShares(routes, 100, 3)
	var got []string
	for _, s := range shares {
		got = append(got, fmt.Sprintf("%s %d %.1f %.1f", s.Route, s.Requests, s.PerHost, s.Agents))
	}
	want := []string{"GET /v1/var/... 1000 10.0 4.0", "PUT /v1/var/... 1000 10.0 0.0", "GET /v1/vars 300 3.0 0.0"}
	if !slices.Equal(got, want) {
		t.Errorf("shares %q, want %q", got, want)
	}
	if other.Route != "2 other routes" || other.Requests != 60 || math.Abs(other.PerHost-0.6) > 1e-9 || other.Busy != 110*time.Millisecond {
		t.Errorf("other %+v, want the 2 other routes' 60 requests, 0.6 per host, 110ms", other)
	}
	if _, other := routeShares(routes, 100, 10); other.Route != "" || other.Requests != 0 {
		t.Errorf("every route shown, other %+v, want none", other)
	}
}

// The coordinator's CPU per rebooted host, or why it was not measured.
func TestCoordCPURows(t *testing.T) {
	r := &Rollout{Hosts: 100, Cycles: make([]time.Duration, 100), CoordCPU: 2 * time.Second, ProcessCPU: 20 * time.Second}
	if got := coordCPUPerHost(r); got != 20*time.Millisecond {
		t.Errorf("coordCPUPerHost = %s, want 20ms", got)
	}
	if rows := coordCPURows(r); len(rows) != 1 || !strings.HasPrefix(rows[0].Value, "20.0ms (2s in the rollout") || rows[0].Verdict != "info" {
		t.Errorf("rows %+v", rows)
	}
	r.CPUNote = "cpu profiling already in use"
	if rows := coordCPURows(r); !strings.Contains(rows[0].Value, "not measured: cpu profiling already in use") {
		t.Errorf("rows %+v, want the note", rows)
	}
	if got := coordCPUPerHost(&Rollout{CoordCPU: time.Second}); got != 0 {
		t.Errorf("no host rebooted: %s, want 0", got)
	}
}

// A new leader's first pass: judged at 50 ms from 5,000 hosts, on the worst
// of the leaders.
func TestFailoverRows(t *testing.T) {
	ms50 := 50 * time.Millisecond
	rep := &Report{Failovers: []*Failover{
		{Hosts: 5000, Latency: 0, Pending: 5000, FirstPass: []time.Duration{time.Second, 6 * time.Second}, Requests: []uint64{40, 42}},
		{Hosts: 5000, Latency: ms50, Pending: 5000, FirstPass: []time.Duration{4 * time.Second, 5 * time.Second}, Requests: []uint64{40, 41}},
		{Hosts: 5000, Latency: ms50, Pending: 5000, FirstPass: []time.Duration{3 * time.Second, 5100 * time.Millisecond}},
		{Hosts: 1000, Latency: ms50, Pending: 1000, FirstPass: []time.Duration{9 * time.Second}},
	}}
	rows := failoverRows(rep)
	want := []struct{ hosts, verdict, value string }{
		{"5000", "info", "6s (worst of 2; 5000 hosts pending; at most 42 Nomad requests)"},
		{"5000 at 50ms", "pass", "5s (worst of 2"},
		{"5000 at 50ms", "FAIL", "5.1s (worst of 2"},
		{"1000 at 50ms", "info", "9s (worst of 1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		if rows[i].Hosts != w.hosts || rows[i].Verdict != w.verdict || !strings.HasPrefix(rows[i].Value, w.value) {
			t.Errorf("row %d: %+v, want %s, %s, %q", i, rows[i], w.hosts, w.verdict, w.value)
		}
	}
}

// An idle cluster's agents' watches are judged per host and hour against
// one ask of each per Nomad's wait, the rest of its requests against the
// smallest cluster's; a window shorter than Nomad's longest wait judges
// neither, and says so.
func TestIdleRows(t *testing.T) {
	window := DefaultIdle
	idle := func(hosts int, watchesPerHost float64, rest uint64) *Idle {
		w := uint64(watchesPerHost * float64(hosts))
		return &Idle{Hosts: hosts, Window: window, Watches: w, Requests: w + rest}
	}
	twoAsks := 2.0 // each of the two watches asked once in the window
	for _, tc := range []struct {
		name  string
		idle  []*Idle
		short bool
		want  []string // the verdicts, two rows per cluster
	}{
		{"each watch once per wait", []*Idle{idle(100, twoAsks, 400), idle(1000, twoAsks, 420)}, false, []string{"pass", "info", "pass", "pass"}},
		{"a watch asking three times a wait", []*Idle{idle(100, 3*twoAsks, 400)}, false, []string{"FAIL", "info"}},
		{"the rest growing with the hosts", []*Idle{idle(100, twoAsks, 400), idle(1000, twoAsks, 4000)}, false, []string{"pass", "info", "pass", "FAIL"}},
		{"a window too short to tell", []*Idle{idle(100, 3*twoAsks, 400), idle(1000, twoAsks, 4000)}, true, []string{"info", "info", "info", "info"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.short {
				for _, id := range tc.idle {
					id.Window = LongestWait / 2
				}
			}
			rows := idleRows(&Report{Idle: tc.idle})
			var got []string
			for _, r := range rows {
				got = append(got, r.Verdict)
				if tc.short && !strings.Contains(r.Value, "shorter than Nomad's longest wait") && strings.HasPrefix(r.Figure, "Nomad requests per idle hour") {
					t.Errorf("row %q: %q does not say the window was too short", r.Figure, r.Value)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("verdicts %v, want %v (rows %+v)", got, tc.want, rows)
			}
		})
	}
}

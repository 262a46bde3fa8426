package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

func metricsSnapshot(now time.Time) (*snapshot, []policy.GroupStatus) {
	s := &snapshot{
		now: now,
		plans: map[string]store.Plan{
			"a": {Host: "a", Phase: store.PhaseDraining},
			"b": {Host: "b", Phase: store.PhasePending, RequestedAt: now.Add(-90 * time.Second)},
			"c": {Host: "c", Phase: store.PhaseStuck},
		},
		control: store.Control{Paused: true},
		hosts: map[string]*hostView{
			"a": {rec: &store.HostRecord{Host: "a", RebootRequired: true}, group: "web"},
			"b": {rec: &store.HostRecord{Host: "b", RebootRequired: true}, group: "web"},
			"c": {rec: &store.HostRecord{Host: "c"}, group: "db"},
			"d": {group: "db"}, // no record, no plan: idle
		},
		names:   []string{"a", "b", "c", "d"},
		missing: map[string]string{"d": "no allocation"},
	}
	groups := []policy.GroupStatus{
		{Group: policy.Group{Name: "web", Concurrency: 2}, Size: 5, Active: 1},
		{Group: policy.Group{Name: "db", Concurrency: 1}, Size: 2, Active: 1},
	}
	return s, groups
}

func TestStateMetricsExport(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newStateMetrics(reg)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.export(metricsSnapshot(now))

	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"phase of a", m.hostPhase.WithLabelValues("a", "draining"), 1},
		{"a not idle", m.hostPhase.WithLabelValues("a", "idle"), 0},
		{"d idle", m.hostPhase.WithLabelValues("d", "idle"), 1},
		{"a reboot required", m.rebootReq.WithLabelValues("a"), 1},
		{"c no reboot required", m.rebootReq.WithLabelValues("c"), 0},
		{"web pending", m.groupHosts.WithLabelValues("web", "pending"), 1},
		{"db stuck", m.groupHosts.WithLabelValues("db", "stuck"), 1},
		{"db idle", m.groupHosts.WithLabelValues("db", "idle"), 1},
		{"web slots used", m.slotsUsed.WithLabelValues("web"), 1},
		{"web slots limit", m.slotsLimit.WithLabelValues("web"), 2},
		{"db slots limit", m.slotsLimit.WithLabelValues("db"), 1},
		{"oldest pending", m.oldestPending, 90},
		{"stuck", m.stuck, 1},
		{"paused", m.paused, 1},
		{"agents missing", m.agentsMissing, 1},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	// One series per host and phase: a fixed set of phases per host.
	if n := testutil.CollectAndCount(m.hostPhase); n != 4*len(phases) {
		t.Errorf("host phase series = %d, want %d", n, 4*len(phases))
	}
	// d has no record: no reboot-required series for it.
	if n := testutil.CollectAndCount(m.rebootReq); n != 3 {
		t.Errorf("reboot required series = %d, want 3", n)
	}
}

// A coordinator that stops leading exports no state of the cluster.
func TestStateMetricsClearedWhenNotLeading(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newStateMetrics(reg)
	m.lead(true)
	m.export(metricsSnapshot(time.Now()))
	m.lead(false)
	m.lead(true)
	want := `
# HELP rollboot_leader 1 while this process is the leading coordinator, else 0.
# TYPE rollboot_leader gauge
rollboot_leader 1
# HELP rollboot_leader_changes_total Times this process became the leading coordinator.
# TYPE rollboot_leader_changes_total counter
rollboot_leader_changes_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rollboot_leader", "rollboot_leader_changes_total"); err != nil {
		t.Error(err)
	}
	m.lead(false)
	for _, v := range []prometheus.Collector{m.hostPhase, m.rebootReq, m.groupHosts, m.slotsUsed, m.slotsLimit} {
		if n := testutil.CollectAndCount(v); n != 0 {
			t.Errorf("%d series left after leadership ended", n)
		}
	}
	if testutil.ToFloat64(m.paused) != 0 || testutil.ToFloat64(m.leader) != 0 || testutil.ToFloat64(m.stuck) != 0 {
		t.Error("gauges not cleared after leadership ended")
	}
}

func TestStateMetricsFinishedCycle(t *testing.T) {
	m := newStateMetrics(prometheus.NewRegistry())
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	m.finished(store.HistoryRecord{Host: "a", Outcome: "rebooted", Finished: t0.Add(10 * time.Minute), Timeline: map[string]time.Time{
		store.PhaseDraining: t0, store.PhaseDrained: t0.Add(time.Minute),
		store.PhaseRebooting: t0.Add(2 * time.Minute), store.PhaseRejoining: t0.Add(5 * time.Minute),
	}})
	m.finished(store.HistoryRecord{Host: "b", Outcome: "canceled", Finished: t0}) // no timeline: no durations
	if got := testutil.ToFloat64(m.reboots.WithLabelValues("rebooted")); got != 1 {
		t.Errorf("rebooted = %v", got)
	}
	if got := testutil.ToFloat64(m.reboots.WithLabelValues("canceled")); got != 1 {
		t.Errorf("canceled = %v", got)
	}
	want := map[string]float64{"drain": 60, "reboot": 180, "rejoin": 300, "cycle": 600}
	for stage, sum := range want {
		h := m.durations.WithLabelValues(stage).(prometheus.Histogram)
		if n := testutil.CollectAndCount(h); n != 1 {
			t.Fatalf("%s: %d series", stage, n)
		}
		if got := histogramSum(t, h); got != sum {
			t.Errorf("%s duration sum = %v, want %v", stage, got, sum)
		}
	}
}

func histogramSum(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var pb dto.Metric
	if err := (<-ch).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleSum()
}

// A coordinator built again on its process's registry (a candidate that stands
// again after a failed reboot) shares the metrics of the one before.
func TestMetricsSurviveANewCoordinator(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := New(Options{Runtime: Runtime{Registry: reg}})
	a.metrics.state.reboots.WithLabelValues("rebooted").Inc()
	b := New(Options{Runtime: Runtime{Registry: reg}})
	if got := testutil.ToFloat64(b.metrics.state.reboots.WithLabelValues("rebooted")); got != 1 {
		t.Fatalf("rebooted after a new coordinator = %v, want 1", got)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// Every kind of wait reason has its own name: the label's values are a fixed set.
func TestWaitKindNames(t *testing.T) {
	seen := map[string]phase.WaitKind{}
	for k := phase.WaitRebootLoop; k <= phase.WaitPlanUnreadable; k++ {
		name := k.Name()
		if name == "" {
			t.Errorf("kind %d has no name", k)
			continue
		}
		if other, dup := seen[name]; dup {
			t.Errorf("kinds %d and %d share the name %q", other, k, name)
		}
		seen[name] = k
	}
	if phase.NotWaiting.Name() != "" || (phase.WaitPlanUnreadable+1).Name() != "" {
		t.Error("NotWaiting or an unknown kind has a name")
	}
}

func TestHostsWaiting(t *testing.T) {
	m := newStateMetrics(prometheus.NewRegistry())
	m.waiting(map[phase.WaitKind]int{phase.NotWaiting: 3, phase.WaitGroupBudget: 2, phase.WaitDraining: 1})
	if n := testutil.CollectAndCount(m.hostsWaiting); n != 2 {
		t.Fatalf("%d series, want 2 (no series for hosts not waiting)", n)
	}
	if got := testutil.ToFloat64(m.hostsWaiting.WithLabelValues("group_budget")); got != 2 {
		t.Errorf("group_budget = %v", got)
	}
	m.waiting(map[phase.WaitKind]int{phase.WaitDraining: 1})
	if n := testutil.CollectAndCount(m.hostsWaiting); n != 1 {
		t.Errorf("%d series after the next pass, want 1: a reason no host waits for any more is dropped", n)
	}
}

func TestSlotHandOff(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		freed     bool
		requested time.Time
		started   time.Time
		wantCount int
		wantSum   float64
	}{
		{"waiting host drains after the slot frees", true, t0.Add(-time.Hour), t0.Add(5 * time.Second), 1, 5},
		{"host asked after the slot freed", true, t0.Add(time.Minute), t0.Add(70 * time.Second), 1, 10},
		{"no slot seen freed", false, t0, t0.Add(time.Second), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{})
			m := c.metrics.state
			if tt.freed {
				c.slotFreed("web", t0)
			}
			c.drainStarted("web", tt.requested, tt.started)
			c.drainStarted("web", tt.requested, tt.started.Add(time.Hour)) // a second drain: no slot freed since
			var pb dto.Metric
			if err := m.handOff.Write(&pb); err != nil {
				t.Fatal(err)
			}
			if got := int(pb.GetHistogram().GetSampleCount()); got != tt.wantCount {
				t.Errorf("count = %d, want %d", got, tt.wantCount)
			}
			if got := pb.GetHistogram().GetSampleSum(); got != tt.wantSum {
				t.Errorf("sum = %v, want %v", got, tt.wantSum)
			}
		})
	}
}

// A pass sets the series of the hosts that changed only, and the result is the
// same as setting them all: a host that moved has its new phase, one gone has no
// series left, one whose record went has no reboot-required series.
func TestStateMetricsExportOnlyChanges(t *testing.T) {
	m := newStateMetrics(prometheus.NewRegistry())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, groups := metricsSnapshot(now)
	m.export(s, groups)

	s, groups = metricsSnapshot(now)
	s.plans["a"] = store.Plan{Host: "a", Phase: store.PhaseRebooting}
	s.hosts["b"].rec = nil
	delete(s.hosts, "c")
	delete(s.plans, "c")
	s.names = []string{"a", "b", "d"}
	m.export(s, groups)
	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"a rebooting", m.hostPhase.WithLabelValues("a", "rebooting"), 1},
		{"a not draining", m.hostPhase.WithLabelValues("a", "draining"), 0},
		{"b pending", m.hostPhase.WithLabelValues("b", "pending"), 1},
		{"d idle", m.hostPhase.WithLabelValues("d", "idle"), 1},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.hostPhase); n != 3*len(phases) {
		t.Errorf("host phase series = %d, want %d (c's gone)", n, 3*len(phases))
	}
	if n := testutil.CollectAndCount(m.rebootReq); n != 1 {
		t.Errorf("reboot required series = %d, want 1 (a's only)", n)
	}
	// A new term starts from nothing.
	m.lead(false)
	m.lead(true)
	s, groups = metricsSnapshot(now)
	m.export(s, groups)
	if n := testutil.CollectAndCount(m.hostPhase); n != 4*len(phases) {
		t.Errorf("host phase series after a new term = %d, want %d", n, 4*len(phases))
	}
}

// The groups' series are set at every pass without being cleared first: a
// group that is gone has none left, the others keep theirs.
func TestStateMetricsGroupGone(t *testing.T) {
	m := newStateMetrics(prometheus.NewRegistry())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, groups := metricsSnapshot(now)
	m.export(s, groups)
	if n := testutil.CollectAndCount(m.groupHosts); n != len(groups)*len(phases) {
		t.Fatalf("group series = %d, want %d", n, len(groups)*len(phases))
	}
	s, groups = metricsSnapshot(now)
	gone := groups[len(groups)-1].Group.Name
	m.export(s, groups[:len(groups)-1])
	if n := testutil.CollectAndCount(m.groupHosts); n != (len(groups)-1)*len(phases) {
		t.Errorf("group series = %d, want %d (%s's gone)", n, (len(groups)-1)*len(phases), gone)
	}
	s, groups = metricsSnapshot(now)
	m.export(s, groups)
	if got := testutil.ToFloat64(m.groupHosts.WithLabelValues("db", "stuck")); got != 1 {
		t.Errorf("db stuck = %v, want 1", got)
	}
}

// series flattens what reg holds: each series by name and labels, with its
// value.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range m.GetLabel() {
				k += "," + l.GetName() + "=" + l.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				out[k] = g.GetValue()
			}
		}
	}
	return out
}

// Over passes that change hosts' records, plans and the hosts themselves, the
// series set only for what changed are those a coordinator exporting for the
// first time sets.
func TestStateMetricsEqualFresh(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	phasesDrawn := []string{"", store.PhaseIdle, store.PhasePending, store.PhaseDraining, store.PhaseStuck}
	groups := []policy.GroupStatus{{Group: policy.Group{Name: "web", Concurrency: 1}}, {Group: policy.Group{Name: "db", Concurrency: 1}}}
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 18))
		reg := prometheus.NewRegistry()
		m := newStateMetrics(reg)
		view := func(name string) *hostView {
			hv := &hostView{group: []string{"web", "db", "gone"}[rng.IntN(3)]}
			if rng.IntN(4) > 0 {
				hv.rec = &store.HostRecord{Host: name, RebootRequired: rng.IntN(2) == 0}
			}
			return hv
		}
		s := &snapshot{now: now, plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
		for i := range 8 {
			name := fmt.Sprintf("h%d", i)
			s.hosts[name] = view(name)
		}
		s.names = sortedKeys(s.hosts)
		for pass := range 30 {
			next := &snapshot{now: now, plans: s.plans, hosts: s.hosts, names: s.names}
			switch rng.IntN(5) {
			case 0: // nothing changed
			case 1: // records changed: new views, the same names
				next.hosts = maps.Clone(s.hosts)
				for _, name := range next.names {
					if rng.IntN(3) == 0 {
						next.hosts[name] = view(name)
					}
				}
			case 2: // plans changed
				next.plans = maps.Clone(s.plans)
				for name := range next.hosts {
					if rng.IntN(3) == 0 {
						next.plans[name] = store.Plan{Host: name, Phase: phasesDrawn[rng.IntN(len(phasesDrawn))],
							RequestedAt: now.Add(-time.Duration(rng.IntN(100)) * time.Second)}
					}
				}
			case 3: // a host comes or goes: the names listed anew
				next.hosts = maps.Clone(s.hosts)
				name := fmt.Sprintf("h%d", rng.IntN(12))
				if _, ok := next.hosts[name]; ok && len(next.hosts) > 1 {
					delete(next.hosts, name)
				} else {
					next.hosts[name] = view(name)
				}
				next.names = sortedKeys(next.hosts)
			case 4: // a host replaced by another: as many names, not the same
				next.hosts = maps.Clone(s.hosts)
				delete(next.hosts, s.names[rng.IntN(len(s.names))])
				for {
					name := fmt.Sprintf("h%d", rng.IntN(30))
					if _, ok := s.hosts[name]; !ok {
						next.hosts[name] = view(name)
						break
					}
				}
				next.names = sortedKeys(next.hosts)
			}
			s = next
			m.export(s, groups)
			// Each host's series as the snapshot says, and the rest as a
			// coordinator exporting for the first time sets them.
			freshReg := prometheus.NewRegistry()
			newStateMetrics(freshReg).export(s, groups)
			want := map[string]float64{}
			for k, v := range series(t, freshReg) {
				if !strings.HasPrefix(k, "rollboot_host_") {
					want[k] = v
				}
			}
			for _, name := range s.names {
				for _, ph := range phases {
					want["rollboot_host_phase,host="+name+",phase="+ph] = boolValue(ph == hostPhase(s.plans[name]))
				}
				if rec := s.hosts[name].rec; rec != nil {
					want["rollboot_host_reboot_required,host="+name] = boolValue(rec.RebootRequired)
				}
			}
			if got := series(t, reg); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d pass %d: series\n%v\nwant\n%v", seed, pass, got, want)
			}
		}
	}
}

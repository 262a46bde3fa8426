package statemetrics

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
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

func testState(now time.Time) State {
	return State{
		Now: now,
		Hosts: []Host{
			{Name: "a", Group: "web", Phase: store.PhaseDraining, HasRecord: true, RebootRequired: true},
			{Name: "b", Group: "web", Phase: store.PhasePending, HasRecord: true, RebootRequired: true, RequestedAt: now.Add(-90 * time.Second)},
			{Name: "c", Group: "db", Phase: store.PhaseStuck, HasRecord: true},
			{Name: "d", Group: "db", Phase: store.PhaseIdle}, // no record, no plan
		},
		Groups: []policy.GroupStatus{
			{Group: policy.Group{Name: "web", Concurrency: 2}, Size: 5, Active: 1},
			{Group: policy.Group{Name: "db", Concurrency: 1, Freezes: policy.Freezes{{Name: "year-end",
				From: policy.Date{Month: 12, Day: 20}, To: policy.Date{Month: 1, Day: 5}}}}, Size: 2, Active: 1},
		},
		Paused:        true,
		AgentsMissing: 1, DetectErrors: 2,
		PausedGroups: map[string]bool{"web": true}, PausedHosts: 3,
	}
}

func TestExport(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Export(testState(now))

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
		{"detection errors", m.detectErrors, 2},
		{"db frozen", m.groupFrozen.WithLabelValues("db"), 1},
		{"web not frozen", m.groupFrozen.WithLabelValues("web"), 0},
		{"web paused", m.groupPaused.WithLabelValues("web"), 1},
		{"db not paused", m.groupPaused.WithLabelValues("db"), 0},
		{"hosts paused", m.hostsPaused, 3},
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
func TestClearedWhenNotLeading(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Lead(true)
	m.Export(testState(time.Now()))
	m.Unbacked(2)
	m.Lead(false)
	m.Lead(true)
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
	m.Lead(false)
	for _, v := range []prometheus.Collector{m.hostPhase, m.rebootReq, m.groupHosts, m.slotsUsed, m.slotsLimit} {
		if n := testutil.CollectAndCount(v); n != 0 {
			t.Errorf("%d series left after leadership ended", n)
		}
	}
	for _, g := range []prometheus.Gauge{m.paused, m.leader, m.stuck, m.unbacked} {
		if testutil.ToFloat64(g) != 0 {
			t.Error("gauges not cleared after leadership ended")
		}
	}
}

// Metrics built again on the same registry (a coordinator built again on its
// process's) share the series of the ones before.
func TestNewSharesRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg).Finished(store.HistoryRecord{Outcome: "rebooted"})
	if got := testutil.ToFloat64(New(reg).reboots.WithLabelValues("rebooted")); got != 1 {
		t.Fatalf("rebooted after New again = %v, want 1", got)
	}
}

func TestFinishedCycle(t *testing.T) {
	m := New(prometheus.NewRegistry())
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	m.Finished(store.HistoryRecord{Host: "a", Outcome: "rebooted", Finished: t0.Add(10 * time.Minute), Timeline: map[string]time.Time{
		store.PhaseDraining: t0, store.PhaseDrained: t0.Add(time.Minute),
		store.PhaseRebooting: t0.Add(2 * time.Minute), store.PhaseRejoining: t0.Add(5 * time.Minute),
	}})
	m.Finished(store.HistoryRecord{Host: "b", Outcome: "canceled", Finished: t0}) // no timeline: no durations
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

// Every kind of wait reason has its own name: the values of the reason label of
// rollboot_hosts_waiting are a fixed set.
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
	m := New(prometheus.NewRegistry())
	m.Waiting(map[phase.WaitKind]int{phase.NotWaiting: 3, phase.WaitGroupBudget: 2, phase.WaitDraining: 1})
	if n := testutil.CollectAndCount(m.hostsWaiting); n != 2 {
		t.Fatalf("%d series, want 2 (no series for hosts not waiting)", n)
	}
	if got := testutil.ToFloat64(m.hostsWaiting.WithLabelValues("group_budget")); got != 2 {
		t.Errorf("group_budget = %v", got)
	}
	m.Waiting(map[phase.WaitKind]int{phase.WaitDraining: 1})
	if n := testutil.CollectAndCount(m.hostsWaiting); n != 1 {
		t.Errorf("%d series after the next pass, want 1: a reason no host waits for any more is dropped", n)
	}
}

func TestHandOff(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		requested time.Time
		started   time.Time
		wantCount int
		wantSum   float64
	}{
		{"waiting host drains after the slot frees", t0.Add(-time.Hour), t0.Add(5 * time.Second), 1, 5},
		{"host asked after the slot freed", t0.Add(time.Minute), t0.Add(70 * time.Second), 1, 10},
		{"drain started before the slot freed", t0.Add(-time.Hour), t0.Add(-time.Second), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(prometheus.NewRegistry())
			m.HandOff(t0, tt.requested, tt.started)
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

// without returns s without the host name.
func without(s State, name string) State {
	s.Hosts = slices.DeleteFunc(slices.Clone(s.Hosts), func(h Host) bool { return h.Name == name })
	return s
}

// hostOf returns a pointer to the host name of s.
func hostOf(t *testing.T, s State, name string) *Host {
	t.Helper()
	i := slices.IndexFunc(s.Hosts, func(h Host) bool { return h.Name == name })
	if i < 0 {
		t.Fatalf("no host %s", name)
	}
	return &s.Hosts[i]
}

// A pass sets the series of the hosts that changed only, and the result is the
// same as setting them all: a host that moved has its new phase, one gone has no
// series left, one whose record went has no reboot-required series.
func TestExportOnlyChanges(t *testing.T) {
	m := New(prometheus.NewRegistry())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Export(testState(now))

	s := without(testState(now), "c")
	hostOf(t, s, "a").Phase = store.PhaseRebooting
	b := hostOf(t, s, "b")
	b.HasRecord, b.RebootRequired = false, false
	m.Export(s)
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
	m.Lead(false)
	m.Lead(true)
	m.Export(testState(now))
	if n := testutil.CollectAndCount(m.hostPhase); n != 4*len(phases) {
		t.Errorf("host phase series after a new term = %d, want %d", n, 4*len(phases))
	}
}

// The groups' series are set at every pass without being cleared first: a
// group that is gone has none left, the others keep theirs.
func TestGroupGone(t *testing.T) {
	m := New(prometheus.NewRegistry())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := testState(now)
	groups := s.Groups
	m.Export(s)
	if n := testutil.CollectAndCount(m.groupHosts); n != len(groups)*len(phases) {
		t.Fatalf("group series = %d, want %d", n, len(groups)*len(phases))
	}
	gone := groups[len(groups)-1].Group.Name
	s.Groups = groups[:len(groups)-1]
	m.Export(s)
	if n := testutil.CollectAndCount(m.groupHosts); n != (len(groups)-1)*len(phases) {
		t.Errorf("group series = %d, want %d (%s's gone)", n, (len(groups)-1)*len(phases), gone)
	}
	m.Export(testState(now))
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

// world is a changing set of hosts, by name.
type world map[string]Host

// state lists the hosts of w, sorted by name as the coordinator lists them.
func (w world) state(now time.Time, groups []policy.GroupStatus) State {
	s := State{Now: now, Groups: groups}
	for _, name := range slices.Sorted(maps.Keys(w)) {
		s.Hosts = append(s.Hosts, w[name])
	}
	return s
}

// Over passes that change hosts' records, phases and the hosts themselves, the
// series set only for what changed are those a coordinator exporting for the
// first time sets.
func TestExportEqualFresh(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	phasesDrawn := []string{"", store.PhaseIdle, store.PhasePending, store.PhaseDraining, store.PhaseStuck}
	groups := []policy.GroupStatus{{Group: policy.Group{Name: "web", Concurrency: 1}}, {Group: policy.Group{Name: "db", Concurrency: 1}}}
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 18))
		reg := prometheus.NewRegistry()
		m := New(reg)
		// record draws a host's group and record, keeping its phase.
		record := func(h Host) Host {
			h.Group = []string{"web", "db", "gone"}[rng.IntN(3)]
			h.HasRecord = rng.IntN(4) > 0
			h.RebootRequired = h.HasRecord && rng.IntN(2) == 0
			return h
		}
		w := world{}
		for i := range 8 {
			name := fmt.Sprintf("h%d", i)
			w[name] = record(Host{Name: name})
		}
		for pass := range 30 {
			w = maps.Clone(w)
			switch rng.IntN(5) {
			case 0: // nothing changed
			case 1: // records changed
				for name, h := range w {
					if rng.IntN(3) == 0 {
						w[name] = record(h)
					}
				}
			case 2: // phases changed
				for name, h := range w {
					if rng.IntN(3) == 0 {
						h.Phase = phasesDrawn[rng.IntN(len(phasesDrawn))]
						h.RequestedAt = now.Add(-time.Duration(rng.IntN(100)) * time.Second)
						w[name] = h
					}
				}
			case 3: // a host comes or goes
				name := fmt.Sprintf("h%d", rng.IntN(12))
				if _, ok := w[name]; ok && len(w) > 1 {
					delete(w, name)
				} else {
					w[name] = record(Host{Name: name})
				}
			case 4: // a host replaced by another: as many hosts, not the same
				names := slices.Sorted(maps.Keys(w))
				delete(w, names[rng.IntN(len(names))])
				for {
					name := fmt.Sprintf("h%d", rng.IntN(30))
					if _, ok := w[name]; !ok && !slices.Contains(names, name) {
						w[name] = record(Host{Name: name})
						break
					}
				}
			}
			s := w.state(now, groups)
			m.Export(s)
			// Each host's series as the state says, and the rest as a
			// coordinator exporting for the first time sets them.
			freshReg := prometheus.NewRegistry()
			New(freshReg).Export(s)
			want := map[string]float64{}
			for k, v := range series(t, freshReg) {
				if !strings.HasPrefix(k, "rollboot_host_") {
					want[k] = v
				}
			}
			for _, h := range s.Hosts {
				phase := h.Phase
				if phase == "" {
					phase = store.PhaseIdle
				}
				for _, ph := range phases {
					want["rollboot_host_phase,host="+h.Name+",phase="+ph] = boolValue(ph == phase)
				}
				if h.HasRecord {
					want["rollboot_host_reboot_required,host="+h.Name] = boolValue(h.RebootRequired)
				}
			}
			if got := series(t, reg); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d pass %d: series\n%v\nwant\n%v", seed, pass, got, want)
			}
		}
	}
}

package coordinator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// Metrics of the rollout (docs/metrics.md). Only the leader exports the state
// of the cluster: a coordinator that stops leading clears those series, so that
// summing them over every process counts each host once. Counters and
// histograms keep their values across leaderships.

// phases are the values of the phase label: a fixed set.
var phases = [...]string{store.PhaseIdle, store.PhasePending, store.PhaseDraining, store.PhaseDrained,
	store.PhaseRebooting, store.PhaseRejoining, store.PhaseBackoff, store.PhaseStuck, store.PhaseUnreadable}

// phaseIndex is the place of each phase in phases.
var phaseIndex = func() map[string]int {
	m := map[string]int{}
	for i, ph := range phases {
		m[ph] = i
	}
	return m
}()

// durationBuckets span a fast drain (seconds) to a long cycle (hours).
var durationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}

// stateMetrics are the leader's view of the cluster, set at the end of each pass.
type stateMetrics struct {
	leader        prometheus.Gauge
	leaderChanges prometheus.Counter
	hostPhase     *prometheus.GaugeVec
	rebootReq     *prometheus.GaugeVec
	groupHosts    *prometheus.GaugeVec
	slotsUsed     *prometheus.GaugeVec
	slotsLimit    *prometheus.GaugeVec
	oldestPending prometheus.Gauge
	stuck         prometheus.Gauge
	paused        prometheus.Gauge
	agentsMissing prometheus.Gauge
	unbacked      prometheus.Gauge
	reboots       *prometheus.CounterVec
	durations     *prometheus.HistogramVec
	hostsWaiting  *prometheus.GaugeVec
	handOff       prometheus.Histogram

	// exported: each host's series as last set (nil: none yet this term), so
	// that a pass sets only those of the hosts that changed, and deletes
	// those of the hosts gone. groupsSet: the groups whose phase series are
	// set. Both the pass goroutine's.
	exported  map[string]hostSeries
	groupsSet map[string]bool
}

// hostSeries is what a host's series say.
type hostSeries struct {
	phase     string
	hasRecord bool
	required  bool
}

func newStateMetrics(reg prometheus.Registerer) *stateMetrics {
	gauge := func(name, help string) prometheus.Gauge {
		return telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	return &stateMetrics{
		leader: gauge("rollboot_leader", "1 while this process is the leading coordinator, else 0."),
		leaderChanges: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "rollboot_leader_changes_total",
			Help: "Times this process became the leading coordinator."})),
		hostPhase:     gaugeVec("rollboot_host_phase", "1 for the host's phase in the rollout, 0 for the others.", "host", "phase"),
		rebootReq:     gaugeVec("rollboot_host_reboot_required", "1 when the host's agent says it needs a reboot.", "host"),
		groupHosts:    gaugeVec("rollboot_group_hosts", "Hosts of the group in each phase.", "group", "phase"),
		slotsUsed:     gaugeVec("rollboot_group_slots_used", "Hosts of the group rollboot has out of service.", "group"),
		slotsLimit:    gaugeVec("rollboot_group_slots_limit", "Hosts of the group rollboot may have out of service at once.", "group"),
		oldestPending: gauge("rollboot_oldest_pending_age_seconds", "Age of the oldest reboot request still pending (0: none)."),
		stuck:         gauge("rollboot_hosts_stuck", "Hosts in the stuck phase, holding their slot until released."),
		paused:        gauge("rollboot_paused", "1 while the rollout is paused."),
		agentsMissing: gauge("rollboot_agents_missing", "Hosts whose agent is known not to run."),
		unbacked: gauge("rollboot_unbacked_host_records",
			"Host records left out: hosts without a Nomad node that no cluster membership, hosts_without_node entry or FleetLock allow-list backs."),
		reboots: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_reboots_total",
			Help: "Finished reboot cycles, by outcome."}, []string{"outcome"})),
		durations: telemetry.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rollboot_cycle_stage_duration_seconds",
			Help: "Durations of the stages of finished reboot cycles: drain, reboot, rejoin and the whole cycle.", Buckets: durationBuckets},
			[]string{"stage"})),
		hostsWaiting: gaugeVec("rollboot_hosts_waiting", "Hosts not moving in the last pass, by the kind of reason.", "reason"),
		handOff: telemetry.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollboot_slot_handoff_seconds",
			Help:    "From a group's slot freeing (or the host asking, if later) to the next host of the group starting its drain.",
			Buckets: durationBuckets})),
	}
}

// lead marks the start (true) or the end (false) of a leadership; at the end the
// state series are cleared.
func (m *stateMetrics) lead(leading bool) {
	m.exported = nil
	if leading {
		m.leader.Set(1)
		m.leaderChanges.Inc()
		return
	}
	m.leader.Set(0)
	for _, v := range []*prometheus.GaugeVec{m.hostPhase, m.rebootReq, m.groupHosts, m.slotsUsed, m.slotsLimit, m.hostsWaiting} {
		v.Reset()
	}
	for _, g := range []prometheus.Gauge{m.oldestPending, m.stuck, m.paused, m.agentsMissing, m.unbacked} {
		g.Set(0)
	}
}

// export sets the state series from what a pass observed, in one walk over the
// hosts.
func (m *stateMetrics) export(s *snapshot, groups []policy.GroupStatus) {
	if m.exported == nil {
		m.hostPhase.Reset()
		m.rebootReq.Reset()
		m.groupHosts.Reset()
		m.exported = map[string]hostSeries{}
		m.groupsSet = map[string]bool{}
	}
	byGroup := make(map[string]*[len(phases)]int, len(groups))
	for _, g := range groups {
		byGroup[g.Group.Name] = &[len(phases)]int{}
		m.slotsUsed.WithLabelValues(g.Group.Name).Set(float64(g.Active))
		m.slotsLimit.WithLabelValues(g.Group.Name).Set(float64(policy.Slots(g.Group, g.Size)))
	}
	oldest, stuck := m.exportHosts(s, byGroup)
	// Every host of s.names has its series now: when they are all there is
	// (the names are distinct), no host is gone.
	for name := range m.exported {
		if len(m.exported) == len(s.names) {
			break
		}
		if _, ok := s.hosts[name]; !ok {
			m.hostPhase.DeletePartialMatch(prometheus.Labels{"host": name})
			m.rebootReq.DeleteLabelValues(name)
			delete(m.exported, name)
		}
	}
	// The groups' series are set again each pass (a phase with no host reads
	// 0), and deleted for a group that is gone.
	for group, n := range byGroup {
		for i, ph := range phases {
			m.groupHosts.WithLabelValues(group, ph).Set(float64(n[i]))
		}
		m.groupsSet[group] = true
	}
	for group := range m.groupsSet {
		if _, ok := byGroup[group]; !ok {
			m.groupHosts.DeletePartialMatch(prometheus.Labels{"group": group})
			delete(m.groupsSet, group)
		}
	}
	m.oldestPending.Set(0)
	if !oldest.IsZero() {
		m.oldestPending.Set(s.now.Sub(oldest).Seconds())
	}
	m.stuck.Set(float64(stuck))
	m.paused.Set(boolValue(s.control.Paused))
	m.agentsMissing.Set(float64(len(s.missing)))
}

// exportHosts sets the series of the hosts that changed since the last pass,
// counts the hosts of each group in each phase, and returns the oldest request
// still pending and the hosts stuck.
func (m *stateMetrics) exportHosts(s *snapshot, byGroup map[string]*[len(phases)]int) (oldest time.Time, stuck int) {
	plans := newPlanCursor(s) // idle hosts' plans are not looked up
	for i, name := range s.names {
		hv, phase := s.hostAt(i), store.PhaseIdle
		var requested time.Time
		if plans.underWay(i) {
			p := s.plans[name]
			phase, requested = hostPhase(p), p.RequestedAt
		}
		m.exportHost(name, seriesOf(phase, hv))
		if n, ok := byGroup[hv.group]; ok {
			if i, ok := phaseOf(phase); ok {
				n[i]++
			}
		}
		switch phase {
		case store.PhaseStuck:
			stuck++
		case store.PhasePending:
			if !requested.IsZero() && (oldest.IsZero() || requested.Before(oldest)) {
				oldest = requested
			}
		}
	}
	return oldest, stuck
}

// seriesOf is what a host's series say for phase and its view.
func seriesOf(phase string, hv *hostView) hostSeries {
	now := hostSeries{phase: phase, hasRecord: hv.rec != nil}
	if hv.rec != nil {
		now.required = hv.rec.RebootRequired
	}
	return now
}

// idleIndex is phaseIndex[store.PhaseIdle].
var idleIndex = phaseIndex[store.PhaseIdle]

// phaseOf is phaseIndex[phase], without a lookup for an idle host (most).
func phaseOf(phase string) (int, bool) {
	if phase == store.PhaseIdle {
		return idleIndex, true
	}
	i, ok := phaseIndex[phase]
	return i, ok
}

// exportHost sets a host's series if they changed since the last pass.
func (m *stateMetrics) exportHost(name string, now hostSeries) {
	before, ok := m.exported[name]
	if ok && before == now {
		return
	}
	if !ok || before.phase != now.phase {
		for _, ph := range phases {
			m.hostPhase.WithLabelValues(name, ph).Set(boolValue(ph == now.phase))
		}
	}
	switch {
	case now.hasRecord:
		m.rebootReq.WithLabelValues(name).Set(boolValue(now.required))
	case ok && before.hasRecord:
		m.rebootReq.DeleteLabelValues(name)
	}
	m.exported[name] = now
}

// hostPhase is the phase of a host's plan, idle without one.
func hostPhase(p store.Plan) string {
	if p.Phase == "" {
		return store.PhaseIdle
	}
	return p.Phase
}

// finished counts a finished cycle and observes the durations of its stages,
// from the time each phase was first entered.
func (m *stateMetrics) finished(h store.HistoryRecord) {
	m.reboots.WithLabelValues(h.Outcome).Inc()
	at := func(phase string) time.Time { return h.Timeline[phase] }
	for _, st := range []struct {
		stage      string
		start, end time.Time
	}{
		{"drain", at(store.PhaseDraining), at(store.PhaseDrained)},
		{"reboot", at(store.PhaseRebooting), at(store.PhaseRejoining)},
		{"rejoin", at(store.PhaseRejoining), h.Finished},
		{"cycle", at(store.PhaseDraining), h.Finished},
	} {
		if !st.start.IsZero() && !st.end.IsZero() && !st.end.Before(st.start) {
			m.durations.WithLabelValues(st.stage).Observe(st.end.Sub(st.start).Seconds())
		}
	}
}

// waiting sets the hosts waiting in the last pass, by kind of reason.
func (m *stateMetrics) waiting(byKind map[phase.WaitKind]int) {
	m.hostsWaiting.Reset()
	for k, n := range byKind {
		if name := k.Name(); name != "" {
			m.hostsWaiting.WithLabelValues(name).Set(float64(n))
		}
	}
}

// slotFreed notes that a cycle of group ended at at, freeing a slot of the
// group (apply, from the plan writes side by side: under c.mu).
func (c *Coordinator) slotFreed(group string, at time.Time) {
	if at.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed == nil {
		c.freed = map[string]time.Time{}
	}
	c.freed[group] = at
}

// drainStarted observes the slot hand-off of a drain granted now to a host of
// group that asked at requested: from the later of its asking and the last
// freeing of a slot of the group (slotFreed). The first drain of a group after
// the coordinator starts leading is not observed (it did not see the slot
// free).
func (c *Coordinator) drainStarted(group string, requested, now time.Time) {
	c.mu.Lock()
	freed, ok := c.freed[group]
	delete(c.freed, group)
	c.mu.Unlock()
	if !ok {
		return
	}
	from := freed
	if requested.After(from) {
		from = requested
	}
	if !now.Before(from) {
		c.metrics.state.handOff.Observe(now.Sub(from).Seconds())
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

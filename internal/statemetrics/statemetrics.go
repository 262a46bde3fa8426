// Package statemetrics exports the leading coordinator's view of the rollout as Prometheus metrics (docs/metrics.md), from what each pass hands it.
package statemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// Only the leader exports the state of the cluster: a coordinator that stops
// leading clears those series, so that summing them over every process counts
// each host once. Counters and histograms keep their values across
// leaderships.

// State is what a pass observed, as the metrics say it: the coordinator builds
// it at the end of each pass (Export keeps nothing of it).
type State struct {
	Now time.Time
	// Hosts: every host the pass saw, each name once.
	Hosts []Host
	// Groups: the groups as admission saw them in the pass.
	Groups []policy.GroupStatus
	Paused bool
	// AgentsMissing: the hosts whose agent is known not to run.
	AgentsMissing int
	// DetectErrors: the hosts whose record reports a failed reboot-need
	// detector (never a reason to reboot: a need it would find goes unseen).
	DetectErrors int
	// PausedGroups: the groups an operator's pause in force holds
	// (`rollboot pause -group G`); PausedHosts: how many hosts one holds.
	PausedGroups map[string]bool
	PausedHosts  int
}

// Host is what the metrics say of one host.
type Host struct {
	Name  string
	Group string
	// Phase: the phase of its plan; store.PhaseIdle (or "") without a plan
	// under way.
	Phase string
	// HasRecord: the host has a usable record; RebootRequired: the record
	// says it needs a reboot.
	HasRecord, RebootRequired bool
	// RequestedAt: when a pending host asked (zero: not known).
	RequestedAt time.Time
}

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

// Metrics are the leader's view of the cluster, set at the end of each pass,
// and the counters of the cycles that finished. Lead, Export and Waiting are
// called from one goroutine (the coordinator's loop); the others set only
// series that Prometheus guards, and are safe from any goroutine.
type Metrics struct {
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
	detectErrors  prometheus.Gauge
	unbacked      prometheus.Gauge
	reboots       *prometheus.CounterVec
	durations     *prometheus.HistogramVec
	hostsWaiting  *prometheus.GaugeVec
	handOff       prometheus.Histogram

	// groupFrozen and groupPaused: the calendar's holds of each group (a
	// freeze in force, an operator's pause); hostsPaused: hosts paused one by one.
	groupFrozen, groupPaused *prometheus.GaugeVec
	hostsPaused              prometheus.Gauge

	// exported: each host's series as last set (nil: none yet this term), so
	// that a pass sets only those of the hosts that changed, and deletes
	// those of the hosts gone. groupsSet: the groups whose phase series are
	// set.
	exported  map[string]hostSeries
	groupsSet map[string]bool
}

// hostSeries is what a host's series say.
type hostSeries struct {
	phase     string
	hasRecord bool
	required  bool
}

// New registers the metrics on reg; those already there (a coordinator built
// again on its process's registry) are shared.
func New(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	return &Metrics{
		leader: gauge("rollboot_leader", "1 while this process is the leading coordinator, else 0."),
		leaderChanges: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "rollboot_leader_changes_total",
			Help: "Times this process became the leading coordinator."})),
		hostPhase:     gaugeVec("rollboot_host_phase", "1 for the host's phase in the rollout, 0 for the others.", "host", "phase"),
		rebootReq:     gaugeVec("rollboot_host_reboot_required", "1 when the host's agent says it needs a reboot.", "host"),
		groupHosts:    gaugeVec("rollboot_group_hosts", "Hosts of the group in each phase.", "group", "phase"),
		slotsUsed:     gaugeVec("rollboot_group_slots_used", "Hosts of the group rollboot has out of service.", "group"),
		slotsLimit:    gaugeVec("rollboot_group_slots_limit", "Hosts of the group rollboot may have out of service at once.", "group"),
		groupFrozen:   gaugeVec("rollboot_group_frozen", "1 while a freeze holds the group's drains (policy block freeze), else 0.", "group"),
		groupPaused:   gaugeVec("rollboot_group_paused", "1 while an operator's pause of the group (rollboot pause -group) holds it, else 0.", "group"),
		hostsPaused:   gauge("rollboot_hosts_paused", "Hosts an operator's pause of the host (rollboot pause HOST) holds."),
		oldestPending: gauge("rollboot_oldest_pending_age_seconds", "Age of the oldest reboot request still pending (0: none)."),
		stuck:         gauge("rollboot_hosts_stuck", "Hosts in the stuck phase, holding their slot until released."),
		paused:        gauge("rollboot_paused", "1 while the rollout is paused."),
		agentsMissing: gauge("rollboot_agents_missing", "Hosts whose agent is known not to run."),
		detectErrors:  gauge("rollboot_hosts_detect_error", "Hosts whose agent reports a failed reboot-need detector."),
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

// Lead marks the start (true) or the end (false) of a leadership; at the end the
// state series are cleared.
func (m *Metrics) Lead(leading bool) {
	m.exported = nil
	if leading {
		m.leader.Set(1)
		m.leaderChanges.Inc()
		return
	}
	m.leader.Set(0)
	for _, v := range []*prometheus.GaugeVec{m.hostPhase, m.rebootReq, m.groupHosts, m.slotsUsed, m.slotsLimit, m.hostsWaiting, m.groupFrozen, m.groupPaused} {
		v.Reset()
	}
	for _, g := range []prometheus.Gauge{m.oldestPending, m.stuck, m.paused, m.agentsMissing, m.detectErrors, m.unbacked, m.hostsPaused} {
		g.Set(0)
	}
}

// Export sets the state series from what a pass observed, in one walk over the
// hosts.
func (m *Metrics) Export(s State) {
	if m.exported == nil {
		m.hostPhase.Reset()
		m.rebootReq.Reset()
		m.groupHosts.Reset()
		m.exported = map[string]hostSeries{}
		m.groupsSet = map[string]bool{}
	}
	byGroup := make(map[string]*[len(phases)]int, len(s.Groups))
	for _, g := range s.Groups {
		byGroup[g.Group.Name] = &[len(phases)]int{}
		m.slotsUsed.WithLabelValues(g.Group.Name).Set(float64(g.Active))
		m.slotsLimit.WithLabelValues(g.Group.Name).Set(float64(policy.Slots(g.Group, g.Size)))
		_, _, frozen := g.Group.Freezes.At(s.Now)
		m.groupFrozen.WithLabelValues(g.Group.Name).Set(boolValue(frozen))
		m.groupPaused.WithLabelValues(g.Group.Name).Set(boolValue(s.PausedGroups[g.Group.Name]))
	}
	m.hostsPaused.Set(float64(s.PausedHosts))
	oldest, stuck := m.exportHosts(s.Hosts, byGroup)
	m.dropGone(s.Hosts)
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
		m.oldestPending.Set(s.Now.Sub(oldest).Seconds())
	}
	m.stuck.Set(float64(stuck))
	m.paused.Set(boolValue(s.Paused))
	m.agentsMissing.Set(float64(s.AgentsMissing))
	m.detectErrors.Set(float64(s.DetectErrors))
}

// exportHosts sets the series of the hosts that changed since the last pass,
// counts the hosts of each group in each phase, and returns the oldest request
// still pending and the hosts stuck.
func (m *Metrics) exportHosts(hosts []Host, byGroup map[string]*[len(phases)]int) (oldest time.Time, stuck int) {
	for i := range hosts {
		h := &hosts[i]
		ph := h.Phase
		if ph == "" {
			ph = store.PhaseIdle
		}
		m.exportHost(h.Name, hostSeries{phase: ph, hasRecord: h.HasRecord, required: h.HasRecord && h.RebootRequired})
		if n, ok := byGroup[h.Group]; ok {
			if i, ok := phaseOf(ph); ok {
				n[i]++
			}
		}
		switch ph {
		case store.PhaseStuck:
			stuck++
		case store.PhasePending:
			if !h.RequestedAt.IsZero() && (oldest.IsZero() || h.RequestedAt.Before(oldest)) {
				oldest = h.RequestedAt
			}
		}
	}
	return oldest, stuck
}

// dropGone deletes the series of the hosts set before that hosts no longer
// lists. Every host of hosts has its series now: when they are all there is
// (the names are distinct), no host is gone.
func (m *Metrics) dropGone(hosts []Host) {
	if len(m.exported) == len(hosts) {
		return
	}
	present := make(map[string]bool, len(hosts))
	for i := range hosts {
		present[hosts[i].Name] = true
	}
	for name := range m.exported {
		if !present[name] {
			m.hostPhase.DeletePartialMatch(prometheus.Labels{"host": name})
			m.rebootReq.DeleteLabelValues(name)
			delete(m.exported, name)
		}
	}
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
func (m *Metrics) exportHost(name string, now hostSeries) {
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

// Finished counts a finished cycle and observes the durations of its stages,
// from the time each phase was first entered.
func (m *Metrics) Finished(h store.HistoryRecord) {
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

// Waiting sets the hosts waiting in the last pass, by kind of reason.
func (m *Metrics) Waiting(byKind map[phase.WaitKind]int) {
	m.hostsWaiting.Reset()
	for k, n := range byKind {
		if name := k.Name(); name != "" {
			m.hostsWaiting.WithLabelValues(name).Set(float64(n))
		}
	}
}

// Unbacked sets the host records left out for want of anything backing them.
func (m *Metrics) Unbacked(n int) { m.unbacked.Set(float64(n)) }

// HandOff observes the slot hand-off of a drain that started at now: from the
// later of freed (when a slot of the host's group last freed) and requested
// (when the host asked).
func (m *Metrics) HandOff(freed, requested, now time.Time) {
	from := freed
	if requested.After(from) {
		from = requested
	}
	if !now.Before(from) {
		m.handOff.Observe(now.Sub(from).Seconds())
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

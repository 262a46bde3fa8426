// Package loopmetrics holds the coordinator loop's own Prometheus series: how
// its passes ran (duration, overruns, spins, steps that timed out), how it
// follows the nodes, the stored policy it enforces, the slots it freed with
// unhealthy workloads; beside the state metrics of package statemetrics.
package loopmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// Metrics are the coordinator's metrics, on the registry of its process (one
// of its own without one). Coordinators built again on the same registry share
// them.
type Metrics struct {
	Registry *prometheus.Registry
	Duration prometheus.Histogram
	Overruns prometheus.Counter
	// Spins: chains of passes cut with only the coordinator's own writes
	// changing.
	Spins prometheus.Counter
	// StepTimeouts: steps of a pass that ran out of time.
	StepTimeouts prometheus.Counter
	// Cordons: nodes of hosts next in line marked ineligible; NotCordoned:
	// hosts next in line the last admission left without a cordon.
	Cordons     prometheus.Counter
	NotCordoned prometheus.Gauge
	// NodeBlocking: 1 while blocking queries follow the nodes because the
	// event stream cannot be had; StreamFailures: the stream's failures.
	NodeBlocking   prometheus.Gauge
	StreamFailures prometheus.Counter
	// PolicyVersion and PolicyInvalid: the stored policy enforced.
	PolicyVersion prometheus.Gauge
	PolicyInvalid prometheus.Gauge
	// UnhealthyReleased: slots freed at healthy.deadline with unhealthy
	// workloads, by group.
	UnhealthyReleased *prometheus.CounterVec
	State             *statemetrics.Metrics
}

// New registers the series in reg (nil: a registry of its own).
func New(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	counter := func(name, help string) prometheus.Counter {
		return telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	return &Metrics{
		Registry: reg,
		Duration: telemetry.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rollboot_coordinator_pass_duration_seconds",
			Help:    "How long one reconcile pass took.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		})),
		Overruns: counter("rollboot_coordinator_pass_overruns_total", "Reconcile passes that took longer than the resync interval."),
		Spins: counter("rollboot_coordinator_pass_spins_total",
			"Chains of reconcile passes cut after 20 passes in a row changed something with nothing else changing: a decision that does not settle."),
		StepTimeouts: counter("rollboot_coordinator_step_timeouts_total",
			"Steps of a reconcile pass (reading the state, or one host's decision) abandoned because a request was not answered in time."),
		Cordons: counter("rollboot_coordinator_cordons_total",
			"Nodes of hosts next in line marked ineligible before their drain (node_meta.cordon_next)."),
		NotCordoned: gauge("rollboot_coordinator_next_not_cordoned",
			"Hosts next in line whose node the last admission did not cordon (node_meta.cordon_next): the capacity gate cannot spare it, or cannot tell; rollboot status says why."),
		NodeBlocking: gauge("rollboot_coordinator_node_watch_blocking",
			"1 while the leader follows the nodes with blocking queries because Nomad's node event stream cannot be had."),
		StreamFailures: counter("rollboot_coordinator_node_stream_failures_total",
			"Subscriptions to Nomad's node event stream that failed or ended early (refused, broker disabled, dropped, closed)."),
		PolicyVersion: gauge("rollboot_policy_version",
			"Version of the stored policy the leading coordinator enforces (0: none stored, the safe default)."),
		PolicyInvalid: gauge("rollboot_policy_invalid", "1 while the stored policy cannot be used: no new reboot starts."),
		UnhealthyReleased: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_unhealthy_released_total",
			Help: "Rebooted hosts whose slot was freed at healthy.deadline with their workloads still unhealthy (healthy.on_deadline = \"release\"), by group.",
		}, []string{"group"})),
		State: statemetrics.New(reg),
	}
}

// NodeWatch records how the nodes are followed: it is told at every change
// and at every failed try of the stream.
func (m *Metrics) NodeWatch(s nodestream.State) {
	if s.Mode == nodestream.Blocking {
		m.NodeBlocking.Set(1)
		m.StreamFailures.Inc()
		return
	}
	m.NodeBlocking.Set(0)
}

// Policy records the stored policy's version, and whether it cannot be used.
func (m *Metrics) Policy(version int, invalid bool) {
	m.PolicyVersion.Set(float64(version))
	v := 0.0
	if invalid {
		v = 1
	}
	m.PolicyInvalid.Set(v)
}

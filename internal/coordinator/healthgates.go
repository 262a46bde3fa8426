package coordinator

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/gateread"
	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// The health gates (the policy's gate blocks, decided by package healthgate):
// no drain of a group starts while a gate guarding it is closed. They are read
// only in a pass with a host in the admission queue, all side by side, once
// per pass; a gate that cannot be read is closed. What they read has nothing
// to watch: a held host's pass is due at the gate's recheck
// (admission.Result.RecheckAt).

// HealthGateReader reads what a health gate decides on (*gateread.Reader).
type HealthGateReader interface {
	Read(ctx context.Context, g healthgate.Gate) healthgate.Observation
}

// gateState is the health gates' state across passes.
type gateState struct {
	reader  HealthGateReader
	metrics *gateMetrics
	// logged: each gate's reason last logged ("" : open), so that a gate is
	// logged when it closes, changes and opens, not at every pass.
	logged map[string]string
}

// readHealthGates reads and decides every gate into the snapshot, once per
// snapshot.
func (c *Coordinator) readHealthGates(ctx context.Context, s *snapshot) {
	if s.healthGates != nil {
		return
	}
	if c.gates.reader == nil {
		c.gates.reader = &gateread.Reader{}
	}
	gates := c.opt.HealthGates
	verdicts := make([]healthgate.Verdict, len(gates))
	var wg sync.WaitGroup
	for i, g := range gates {
		wg.Go(func() {
			o := c.gates.reader.Read(ctx, g)
			if o.Err != nil {
				c.gates.metrics.errors.WithLabelValues(g.Name).Inc()
			}
			verdicts[i] = healthgate.Decide(g, o)
		})
	}
	wg.Wait()
	s.healthGates = make(map[string]healthgate.Verdict, len(gates))
	c.gates.metrics.open.Reset()
	if c.gates.logged == nil {
		c.gates.logged = map[string]string{}
	}
	for i, g := range gates {
		v := verdicts[i]
		s.healthGates[g.Name] = v
		c.gates.metrics.open.WithLabelValues(g.Name).Set(boolValue(v.Open))
		if c.gates.logged[g.Name] == v.Reason {
			continue
		}
		if v.Open {
			c.log.Info("health gate open", "gate", g.Name)
		} else {
			c.log.Info("health gate closed: drains it guards wait", "gate", g.Name, "reason", v.Reason, "recheck", g.Recheck)
		}
		c.gates.logged[g.Name] = v.Reason
	}
}

// gateMetrics are the health gates' series.
type gateMetrics struct {
	open   *prometheus.GaugeVec
	errors *prometheus.CounterVec
}

func newGateMetrics(reg prometheus.Registerer) *gateMetrics {
	return &gateMetrics{
		open: telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rollboot_health_gate_open",
			Help: "1 while the health gate (by name) was open when last read, 0 while it holds the drains it guards; read only while some host waits to start."}, []string{"gate"})),
		errors: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_health_gate_read_errors_total",
			Help: "Reads of a health gate (by name) that failed: the gate is closed until a read succeeds."}, []string{"gate"})),
	}
}

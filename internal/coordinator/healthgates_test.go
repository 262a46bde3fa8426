package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// fakeGates is a HealthGateReader answering each gate by name, counting reads.
type fakeGates struct {
	mu    sync.Mutex
	obs   map[string]healthgate.Observation
	reads int
}

func (f *fakeGates) Read(_ context.Context, g healthgate.Gate) healthgate.Observation {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.obs[g.Name]
}

// The health gates are read once per pass, only while a host waits to start;
// a closed gate holds the hosts with its reason until its recheck, an
// unreadable one too, counted.
func TestReadHealthGates(t *testing.T) {
	gates := []healthgate.Gate{
		{Name: "http", Kind: healthgate.KindHTTP, URL: "http://lb/", ExpectStatus: 200, Recheck: 10 * time.Second},
		{Name: "prom", Kind: healthgate.KindPromQL, Query: "up == 0", Recheck: 20 * time.Second},
	}
	f := &fakeGates{obs: map[string]healthgate.Observation{
		"http": {Status: 200},
		"prom": {Err: errors.New("unreachable")},
	}}
	c := New(Options{Deps: Deps{Nodes: &capNodes{}, GateReader: f}, Rules: rules.Rules{HealthGates: gates},
		Runtime: Runtime{Now: func() time.Time { return t0 }}})

	idle := admitSnapshot([]testHost{{name: "a"}}, nil)
	c.admit(context.Background(), idle)
	if f.reads != 0 {
		t.Fatalf("read with nobody waiting to start: %d", f.reads)
	}
	s := admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}}, nil)
	adm := c.admit(context.Background(), s)
	c.admit(context.Background(), s) // once per snapshot
	if f.reads != 2 {
		t.Errorf("reads = %d, want one per gate", f.reads)
	}
	want := phase.WaitFor(phase.WaitHealthGate, `health gate "prom": cannot tell (promql): unreachable`)
	if adm.Admitted["a"] || adm.Wait["a"] != want {
		t.Errorf("admission %+v, want a held by %v", adm, want)
	}
	if !adm.RecheckAt.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("recheck at %v, want the closed gate's", adm.RecheckAt)
	}
	if got := metricValue(t, c, "rollboot_health_gate_open", "gate", "http"); got != 1 {
		t.Errorf("http gate open = %v", got)
	}
	if got := metricValue(t, c, "rollboot_health_gate_open", "gate", "prom"); got != 0 {
		t.Errorf("prom gate open = %v", got)
	}
	if got := metricValue(t, c, "rollboot_health_gate_read_errors_total", "gate", "prom"); got != 1 {
		t.Errorf("prom read errors = %v", got)
	}

	f.obs["prom"] = healthgate.Observation{}
	s = admitSnapshot([]testHost{{name: "a", phase: store.PhasePending}}, nil)
	if adm := c.admit(context.Background(), s); !adm.Admitted["a"] {
		t.Errorf("not admitted with every gate open: %+v", adm)
	}
}

package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// scriptedPolicy is a PolicySource that answers what the test set last.
type scriptedPolicy struct {
	rules rules.Rules
	err   error
}

func (p *scriptedPolicy) Rules(context.Context) (rules.Rules, error) { return p.rules, p.err }
func (p *scriptedPolicy) Watch(ctx context.Context, idx uint64, _ time.Duration) (uint64, error) {
	<-ctx.Done()
	return idx, ctx.Err()
}

func gaugeValue(t *testing.T, co *Coordinator, name string) float64 {
	t.Helper()
	return metricValue(t, co, name)
}

// metricValue is the value of the gauge or counter name in co's registry
// whose labels include the pairs of labels ("gate", "prom", ...).
func metricValue(t *testing.T, co *Coordinator, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := co.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// The coordinator decides with the stored policy only: one that cannot be used
// holds every new start (never the defaults in its place) while the last good
// rules stay; a good one is taken at the next pass; one that cannot be read at
// all stops the pass. The enforcement record and the metrics say which.
func TestStoredPolicyRules(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 2})
	ctx := t.Context()
	hosts := []string{"client-1", "client-2"}
	for _, name := range hosts {
		h, _ := sim.Host(name)
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Requests = map[string]store.Request{"client-1": {At: time.Now()}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	src := &scriptedPolicy{err: &InvalidPolicyError{Version: 1, Err: errors.New("p.hcl:1:9: Invalid expression")}}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: st, Policy: src},
		Rules: rules.Rules{
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Identity: "test (pid 1)"},
	})

	pass := func() {
		t.Helper()
		for range 2 { // the first pass makes the host pending, the second admits it
			if err := co.ReconcileOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	enforced := func() store.Enforcement {
		t.Helper()
		e, err := st.Enforcement(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	// Never a good policy: held, with the problem as the reason.
	pass()
	p, _ := st.Plan(ctx, "client-1")
	if p.Phase != store.PhasePending || p.Waiting != "no new reboot starts: the stored policy (version 1) is invalid: p.hcl:1:9: Invalid expression" {
		t.Fatalf("plan under an invalid policy: %s %q", p.Phase, p.Waiting)
	}
	if e := enforced(); e.Leader != "test (pid 1)" || e.PolicyVersion != 0 || !strings.Contains(e.PolicyProblem, "version 1") {
		t.Errorf("enforcement: %+v", e)
	}
	if gaugeValue(t, co, "rollboot_policy_invalid") != 1 {
		t.Error("rollboot_policy_invalid is not 1")
	}

	// A good policy is taken: the host is admitted into its group.
	src.rules, src.err = rules.Rules{Version: 2, Groups: []rules.GroupSpec{{Group: policy.Group{Name: "all", Concurrency: 1}}},
		Timing: co.opt.Timing, HistorySize: 10}, nil
	pass()
	p, _ = st.Plan(ctx, "client-1")
	if !p.Active() || p.Group != "all" {
		t.Fatalf("plan under a good policy: %s in %q (%q)", p.Phase, p.Group, p.Waiting)
	}
	if e := enforced(); e.PolicyVersion != 2 || e.PolicyProblem != "" {
		t.Errorf("enforcement: %+v", e)
	}
	if gaugeValue(t, co, "rollboot_policy_invalid") != 0 || gaugeValue(t, co, "rollboot_policy_version") != 2 {
		t.Error("policy metrics not updated")
	}
	before := enforced().ModifyIndex
	pass()
	if enforced().ModifyIndex != before {
		t.Error("the enforcement record was written again without a change")
	}

	// Invalid again: the last good rules stay (the group "all"), new starts hold.
	src.err = &InvalidPolicyError{Version: 3, Err: errors.New("x")}
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Requests["client-2"] = store.Request{At: time.Now()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pass()
	p, _ = st.Plan(ctx, "client-2")
	if p.Phase != store.PhasePending || !strings.HasPrefix(p.Waiting, "no new reboot starts: the stored policy (version 3)") || p.Group != "all" {
		t.Errorf("second host: %s in %q (%q)", p.Phase, p.Group, p.Waiting)
	}
	if e := enforced(); e.PolicyVersion != 2 || !strings.Contains(e.PolicyProblem, "version 3") {
		t.Errorf("enforcement: %+v", e)
	}

	// Not readable at all: the pass does nothing and says why.
	src.err = errors.New("connection refused")
	if err := co.ReconcileOnce(ctx); err == nil || !strings.Contains(err.Error(), "read the stored policy: connection refused") {
		t.Errorf("pass with an unreadable policy: %v", err)
	}
}

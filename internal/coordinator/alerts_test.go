package coordinator

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

func TestAlertWaitText(t *testing.T) {
	for w, want := range map[phase.WaitReason]string{
		phase.WaitFor(phase.WaitAlerts, "NodeDown, DiskFull"):                                     "no new drain starts while alerts fire: NodeDown, DiskFull",
		phase.WaitFor(phase.WaitAlertsUnknown, "Prometheus at http://p:9090: connection refused"): "no new drain starts: cannot tell whether alerts fire: Prometheus at http://p:9090: connection refused",
	} {
		if got := w.String(); got != want {
			t.Errorf("%+v: %q, want %q", w, got, want)
		}
		if w.Stored() == "" {
			t.Errorf("%+v: an alert hold is not stored in the plan", w)
		}
	}
	if phase.WaitAlerts.Name() != "alerts" || phase.WaitAlertsUnknown.Name() != "alerts_unknown" {
		t.Errorf("names %q %q", phase.WaitAlerts.Name(), phase.WaitAlertsUnknown.Name())
	}
}

// Alerts hold every host waiting to start, in every group, before the budgets.
func TestAdmitAlerts(t *testing.T) {
	groups := []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 2, Settle: 2 * time.Minute}}
	pending := []testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: time.Minute},
		{name: "c", phase: store.PhaseDraining}}
	tests := []struct {
		name     string
		verdict  *alertgate.Verdict
		mod      func(*snapshot)
		admitted []string
		wait     map[string]phase.WaitReason
	}{
		{name: "not read: nothing held", admitted: []string{"a"}},
		{name: "no alert: nothing held", verdict: &alertgate.Verdict{}, admitted: []string{"a"}},
		{name: "firing alerts hold every pending host",
			verdict: &alertgate.Verdict{Blocking: []string{"DiskFull", "NodeDown"}},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitAlerts, "DiskFull, NodeDown"),
				"b": phase.WaitFor(phase.WaitAlerts, "DiskFull, NodeDown")}},
		{name: "an unreadable source holds",
			verdict: &alertgate.Verdict{Unknown: "Prometheus at http://p: refused"},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitAlertsUnknown, "Prometheus at http://p: refused"),
				"b": phase.WaitFor(phase.WaitAlertsUnknown, "Prometheus at http://p: refused")}},
		{name: "unreadable with alerts known: both said",
			verdict: &alertgate.Verdict{Unknown: "Alertmanager at http://am: timeout", Blocking: []string{"NodeDown"}},
			wait: map[string]phase.WaitReason{
				"a": phase.WaitFor(phase.WaitAlertsUnknown, "Alertmanager at http://am: timeout (and firing: NodeDown)"),
				"b": phase.WaitFor(phase.WaitAlertsUnknown, "Alertmanager at http://am: timeout (and firing: NodeDown)")}},
		{name: "alerts are said before a group's settle time",
			verdict: &alertgate.Verdict{Blocking: []string{"NodeDown"}},
			mod:     backAt("z", t0.Add(-time.Minute)),
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitAlerts, "NodeDown"),
				"b": phase.WaitFor(phase.WaitAlerts, "NodeDown")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts := append([]testHost{{name: "z"}}, pending...)
			s := admitSnapshot(hosts, tt.mod)
			s.alerts = tt.verdict
			adm := admitSnap(admission.Rules{Groups: groups, DrainDeadline: time.Hour}, s)
			if got := sortedTrue(adm.Admitted); strings.Join(got, ",") != strings.Join(tt.admitted, ",") {
				t.Errorf("admitted %v, want %v", got, tt.admitted)
			}
			for h, want := range tt.wait {
				if adm.Wait[h] != want {
					t.Errorf("%s waits %+v, want %+v", h, adm.Wait[h], want)
				}
			}
		})
	}
}

func sortedTrue(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// fakeAlerts is an AlertReader that counts its reads.
type fakeAlerts struct {
	obs   alertgate.Observation
	reads int
}

func (f *fakeAlerts) ReadAlerts(context.Context, alertgate.Rules) alertgate.Observation {
	f.reads++
	return f.obs
}

// The alerts are read only when the gate is on and a host waits to start; a
// held rollout is due a pass after Recheck.
func TestReadAlerts(t *testing.T) {
	on := alertgate.Rules{PrometheusURL: "http://p:9090", Recheck: 30 * time.Second, Timeout: time.Second}
	tests := []struct {
		name      string
		rules     alertgate.Rules
		hosts     []testHost
		obs       alertgate.Observation
		reads     int
		holds     bool
		blocking  float64
		errCount  float64
		wantRetry bool
	}{
		{name: "off: never read", hosts: []testHost{{name: "a", phase: store.PhasePending}}},
		{name: "nobody waits to start: not read", rules: on,
			hosts: []testHost{{name: "a"}, {name: "b", phase: store.PhaseDraining}}},
		{name: "a host waits: read, nothing fires", rules: on, hosts: []testHost{{name: "a", phase: store.PhasePending}}, reads: 1},
		{name: "firing: held, asked again after recheck", rules: on, hosts: []testHost{{name: "a", phase: store.PhasePending}},
			obs:   alertgate.Observation{Prometheus: []alertgate.Alert{{Labels: map[string]string{"alertname": "X"}, State: "firing"}}},
			reads: 1, holds: true, blocking: 1, wantRetry: true},
		{name: "unreadable: held, counted, asked again", rules: on, hosts: []testHost{{name: "a", phase: store.PhasePending}},
			obs:   alertgate.Observation{PrometheusErr: errors.New("refused")},
			reads: 1, holds: true, errCount: 1, wantRetry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAlerts{obs: tt.obs}
			c := New(Options{
				Deps:    Deps{Nodes: &capNodes{}, AlertReader: f},
				Rules:   rules.Rules{Alerts: tt.rules},
				Runtime: Runtime{Now: func() time.Time { return t0 }},
			})
			s := admitSnapshot(tt.hosts, nil)
			c.admit(context.Background(), s)
			c.admit(context.Background(), s) // once per snapshot
			if f.reads != tt.reads {
				t.Errorf("reads = %d, want %d", f.reads, tt.reads)
			}
			if holds := s.alerts != nil && s.alerts.Holds(); holds != tt.holds {
				t.Errorf("holds = %v, want %v", holds, tt.holds)
			}
			if got := metricValue(t, c, "rollboot_alerts_blocking"); got != tt.blocking {
				t.Errorf("rollboot_alerts_blocking = %v, want %v", got, tt.blocking)
			}
			if got := metricValue(t, c, "rollboot_alerts_query_errors_total", "source", "prometheus"); got != tt.errCount {
				t.Errorf("query errors = %v, want %v", got, tt.errCount)
			}
			if want := t0.Add(30 * time.Second); tt.wantRetry != (c.alerts.Next().Equal(want)) {
				t.Errorf("next check %v, want one at %v: %v", c.alerts.Next(), want, tt.wantRetry)
			}
		})
	}
}

// Preview reads the alerts again once it made the hosts with a need pending
// (observe found nobody waiting to start then): `rollboot plan` names the
// alerts that would hold them even before a coordinator saw their need.
func TestReadAlertsForPreviewedPendingHosts(t *testing.T) {
	f := &fakeAlerts{obs: alertgate.Observation{Prometheus: []alertgate.Alert{{Labels: map[string]string{"alertname": "X"}, State: "firing"}}}}
	c := New(Options{
		Deps: Deps{Nodes: &capNodes{}, AlertReader: f},
		Rules: rules.Rules{
			Alerts: alertgate.Rules{PrometheusURL: "http://p", Recheck: time.Second, Timeout: time.Second},
		},
	})
	s := admitSnapshot([]testHost{{name: "a"}}, nil)
	c.admit(context.Background(), s)
	if f.reads != 0 || s.alerts != nil {
		t.Fatalf("read with nobody waiting: %d reads, %+v", f.reads, s.alerts)
	}
	s.plans = maps.Clone(s.plans) // as Preview: a snapshot's plans map is never changed in place
	s.plans["a"] = store.Plan{Host: "a", Phase: store.PhasePending, NodeID: "node-a"}
	s.listBusy()
	c.admit(context.Background(), s)
	if f.reads != 1 || s.alerts == nil || !s.alerts.Holds() {
		t.Fatalf("not read for the previewed pending host: %d reads, %+v", f.reads, s.alerts)
	}
	adm := admitSnap(admission.Rules{Groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1}}, DrainDeadline: time.Hour}, s)
	if adm.Admitted["a"] || adm.Wait["a"] != phase.WaitFor(phase.WaitAlerts, "X") {
		t.Errorf("admission: %+v", adm)
	}
}

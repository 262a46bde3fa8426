package coordinator

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/statemetrics"
	"github.com/rollboot/rollboot/internal/store"
)

// The state metrics get every host of the snapshot, in its order, with the
// phase and request time of its plan under way only, and the groups, pause
// and missing agents of the pass.
func TestStateInput(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	groups := []policy.GroupStatus{
		{Group: policy.Group{Name: "web", Concurrency: 2}, Size: 5, Active: 1},
		{Group: policy.Group{Name: "db", Concurrency: 1}, Size: 2, Active: 1},
	}
	s := &snapshot{
		now: now,
		plans: map[string]store.Plan{
			"a": {Host: "a", Phase: store.PhaseDraining},
			"b": {Host: "b", Phase: store.PhasePending, RequestedAt: now.Add(-90 * time.Second)},
			"c": {Host: "c", Phase: store.PhaseStuck},
			"e": {Host: "e", Phase: store.PhaseIdle, RequestedAt: now.Add(-time.Hour)}, // idle: its request time unused
			"f": {Host: "f", Phase: store.PhaseDraining},                               // no host: not listed
		},
		control: store.Control{Paused: true, GroupPauses: map[string]store.Pause{"web": {Reason: "deploy"}},
			HostPauses: map[string]store.Pause{"c": {}, "e": {}}},
		hosts: map[string]*hostView{
			"a": {rec: &store.HostRecord{Host: "a", RebootRequired: true}, group: "web"},
			"b": {rec: &store.HostRecord{Host: "b", RebootRequired: true}, group: "web"},
			"c": {rec: &store.HostRecord{Host: "c", DetectError: "kernel detector: no installed kernel found"}, group: "db"},
			"d": {group: "db"}, // no record, no plan: idle
			"e": {rec: &store.HostRecord{Host: "e"}, group: "db"},
		},
		names:    []string{"a", "b", "c", "d", "e"},
		missing:  map[string]string{"d": "no allocation"},
		statuses: groups,
	}
	want := statemetrics.State{
		Now: now,
		Hosts: []statemetrics.Host{
			{Name: "a", Group: "web", Phase: store.PhaseDraining, HasRecord: true, RebootRequired: true},
			{Name: "b", Group: "web", Phase: store.PhasePending, HasRecord: true, RebootRequired: true, RequestedAt: now.Add(-90 * time.Second)},
			{Name: "c", Group: "db", Phase: store.PhaseStuck, HasRecord: true},
			{Name: "d", Group: "db", Phase: store.PhaseIdle},
			{Name: "e", Group: "db", Phase: store.PhaseIdle, HasRecord: true},
		},
		Groups:        groups,
		Paused:        true,
		AgentsMissing: 1,
		DetectErrors:  1,
		PausedGroups:  map[string]bool{"web": true},
		PausedHosts:   2,
	}
	buf := make([]statemetrics.Host, 7)
	got := stateInput(s, buf)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("state\n%+v\nwant\n%+v", got, want)
	}
	if &got.Hosts[0] != &buf[0] {
		t.Error("the hosts are not in the buffer handed in")
	}
}

// A coordinator built again on its process's registry (a candidate that stands
// again after a failed reboot) shares the metrics of the one before.
func TestMetricsSurviveANewCoordinator(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(Options{Runtime: Runtime{Registry: reg}}).metrics.State.Finished(store.HistoryRecord{Outcome: "rebooted"})
	b := New(Options{Runtime: Runtime{Registry: reg}})
	b.metrics.State.Finished(store.HistoryRecord{Outcome: "rebooted"})
	want := `
# HELP rollboot_reboots_total Finished reboot cycles, by outcome.
# TYPE rollboot_reboots_total counter
rollboot_reboots_total{outcome="rebooted"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rollboot_reboots_total"); err != nil {
		t.Fatal(err)
	}
}

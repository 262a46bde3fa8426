package status

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host on its way has no reason in its plan; the view tells it: for a pending
// host its place in line, the host ahead and the group's hosts out of service,
// computed from the plans as the coordinator admits (first come, first served,
// then name); for a host out of service, its phase's step. A stored reason (a
// hold) is shown as it is.
func TestReasonsOfHostsOnTheirWay(t *testing.T) {
	t0 := time.Date(2025, 1, 6, 22, 0, 0, 0, time.UTC)
	queued := func(host, group string, minute int) store.Plan {
		return store.Plan{Host: host, Group: group, Phase: store.PhasePending, RequestedAt: t0.Add(time.Duration(minute) * time.Minute)}
	}
	plans := map[string]store.Plan{
		"a": queued("a", "web", 2),
		"b": queued("b", "web", 1),
		"c": queued("c", "web", 2),
		"d": {Host: "d", Group: "web", Phase: store.PhaseRebooting},
		"e": {Host: "e", Group: "db", Phase: store.PhaseRejoining},
		"f": queued("f", "db", 0),
		"g": {Host: "g", Group: "web", Phase: store.PhasePending, Waiting: "paused"},
		"h": {Host: "h", Group: "web", Phase: store.PhaseIdle},
		"i": {Host: "i", Group: "ops", Phase: store.PhaseStuck, Waiting: "stuck: it did not come back"},
	}
	want := map[string]string{
		"b": `waiting for a slot in group "web" (first in line; out of service: d)`,
		"a": `waiting for a slot in group "web" (number 2 in line, after b; out of service: d)`,
		"c": `waiting for a slot in group "web" (number 3 in line, after a; out of service: d)`,
		"d": "rebooting",
		"e": "waiting for the host to be back: its node ready and eligible, its new boot ID reported",
		"f": `waiting for a slot in group "db" (first in line; out of service: e)`,
		"g": "paused",
		"h": "",
		"i": "stuck: it did not come back",
	}
	v := Build(nil, plans, store.Control{})
	for _, h := range v.Hosts {
		if h.Waiting != want[h.Host] {
			t.Errorf("%s waits for %q, want %q", h.Host, h.Waiting, want[h.Host])
		}
	}
}

func TestOutOfService(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b", "c"}, "; out of service: a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, "; out of service: a, b, c and 2 more"},
	} {
		if got := outOfService(tc.hosts); got != tc.want {
			t.Errorf("outOfService(%v) = %q, want %q", tc.hosts, got, tc.want)
		}
	}
}

package status

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rollboot/rollboot/internal/store"
)

// The status of a realistic cluster (host names as cloud providers and
// operators give them, the coordinator's own reasons) fits TableWidth columns;
// a reason longer than three lines is cut and says where it is whole.
func TestTableFits100Columns(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	v := View{
		Policy: &Policy{Leader: "nomad-client-prod-eu-west-1a-003 (pid 4242)", Stored: 7, Enforced: 7},
		Paused: true, PauseReason: "change freeze for the quarterly release, until Monday 08:00 UTC (ticket OPS-4821)",
		PausedBy: "token ops-oncall-alice",
		Hosts: []Host{
			{Host: "nomad-client-prod-eu-west-1a-017", Group: "web-frontend", Phase: store.PhaseDraining, Since: ago(90 * time.Second),
				Roles: []string{store.RoleNomadClient}, RebootRequired: true, Reason: "sentinel file /var/run/reboot-required",
				Waiting: "drain: 3 allocations left (web-frontend.nginx[2], web-frontend.api[0], logs.vector[17]); deadline in 14m"},
			{Host: "nomad-client-prod-eu-west-1a-018", Group: "web-frontend", Phase: store.PhasePending, Since: ago(5 * time.Minute),
				RebootRequired: true, Reason: "sentinel file /var/run/reboot-required",
				Waiting: `waiting for a slot in group "web-frontend" (number 1 in line, after nomad-client-prod-eu-west-1a-017; 1/1 taken)`},
			{Host: "nomad-server-prod-eu-west-1b-001", Group: "servers", Phase: store.PhasePending, Since: ago(3 * time.Hour),
				Roles: []string{store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer}, RebootRequired: true,
				Reason: "sentinel command /usr/local/bin/needs-reboot: kernel 6.1.0-28 installed, 6.1.0-27 running",
				Waiting: "quorum gate: consul: 2 of 3 servers healthy, the cluster cannot lose one more; vault: " +
					"standby vault-2 is sealed; nomad: autopilot says the cluster is unhealthy (failure tolerance 0): " +
					"waiting until every cluster can lose one server"},
			{Host: "ip-10-20-130-217.eu-west-1.compute.internal", Group: "batch-workers-spot", Phase: store.PhaseStuck,
				Since: ago(26 * time.Hour), ManualRequest: true, Reason: "manual request: CVE-2026-1234",
				LastError: "the host did not come back within 10m0s: no new boot ID reported"},
			{Host: "db-1", Phase: store.PhaseIdle},
		},
		AgentCheck: "job rollboot has no running allocation on nodes nomad-client-prod-eu-west-1a-019, nomad-client-prod-eu-west-1a-020: their hosts are not rebooted",
	}
	var b bytes.Buffer
	if err := WriteText(&b, v, now); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(b.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > TableWidth {
			t.Errorf("line %d has %d columns, more than %d:\n%s", i+1, n, TableWidth, l)
		}
	}
	if !strings.Contains(b.String(), "(Cut to fit: rollboot status HOST shows a host in full") {
		t.Error("a cut reason does not say where it is whole")
	}
	golden(t, "narrow.txt", b.String())
	// -verbose keeps every host on one line.
	b.Reset()
	if err := WriteWide(&b, v, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), v.Hosts[2].Waiting) {
		t.Errorf("the wide table cut a reason:\n%s", b.String())
	}
}

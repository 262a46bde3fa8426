package status

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// `status` shows the agent's hold and its last failed attempt, even when the
// coordinator has not (yet) put them in the plan.
func TestStatusShowsHoldAndFailure(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  store.HostRecord
		plan store.Plan
		want []string
	}{
		{
			name: "hold",
			rec:  store.HostRecord{Host: "s1", RebootingGrant: "g1", HoldReason: "quorum gate: nomad: no leader"},
			plan: store.Plan{Host: "s1", Phase: store.PhaseRebooting},
			want: []string{"agent holds the reboot: quorum gate: nomad: no leader"},
		},
		{
			name: "failure not yet seen by the coordinator",
			rec: store.HostRecord{Host: "c1", RebootingGrant: "g1", Failure: &store.RebootFailure{Grant: "g1", Step: store.StepPreHook,
				ExitStatus: 3, Message: "check-disk: disk full", At: at}},
			plan: store.Plan{Host: "c1", Phase: store.PhaseRebooting},
			want: []string{"last failed attempt: pre-reboot hook failed (exit status 3): check-disk: disk full"},
		},
		{
			name: "failure in the plan's last error is not repeated",
			rec: store.HostRecord{Host: "c1", Failure: &store.RebootFailure{Grant: "g1", Step: store.StepReboot,
				ExitStatus: 1, Message: "systemctl reboot: denied", At: at}},
			plan: store.Plan{Host: "c1", Phase: store.PhaseBackoff,
				LastError: "the host did not reboot: reboot command failed (exit status 1): systemctl reboot: denied"},
			want: []string{"the host did not reboot: reboot command failed (exit status 1)"},
		},
		{
			name: "cordoned next in line",
			plan: store.Plan{Host: "c2", Phase: store.PhasePending, CordonedAt: at, CordonNode: "n2"},
			want: []string{"cordoned: node ineligible until its drain"},
		},
		{
			name: "next in line, no cordon",
			plan: store.Plan{Host: "c3", Phase: store.PhasePending, NoCordon: "the capacity gate holds c1"},
			want: []string{"no cordon: the capacity gate holds c1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Host{Host: tc.rec.Host, Phase: store.PhaseIdle}
			fillPlan(&v, tc.plan)
			fillAgentReport(&v, tc.rec)
			// The host's Why, which the table wraps and status HOST shows whole.
			var b bytes.Buffer
			b.WriteString(why(v))
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("status:\n%s\nwant %q", b.String(), w)
				}
			}
			if strings.Count(b.String(), "exit status") > 1 {
				t.Errorf("the failure is shown twice:\n%s", b.String())
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// The table's Since column and a missing agent, which cmd/rollboot's TestStatusGolden (the
// command run against the emulator) cannot show without a clock, rendered at a fixed time.
func TestStatusGoldenRender(t *testing.T) {
	now := time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	v := View{Hosts: []Host{
		{Host: "a.example.com", Group: "web", NodeID: "5f1c9a2e-0000", Roles: []string{store.RoleNomadClient, store.RoleNomadServer},
			Phase: store.PhasePending, Since: now.Add(-90 * time.Second), RebootRequired: true, Reason: "kernel update",
			Waiting: "waiting for a slot in group web (1/1 taken)", AgentMissing: "agent missing: allocation failed"},
		{Host: "b", Phase: store.PhaseIdle, ManualRequest: true},
		{Host: "c", Phase: store.PhaseRejoining, Since: now.Add(-3 * time.Hour), HoldReason: "quorum gate: vault: sealed",
			Waiting: "quorum gate: vault: sealed", DiscoverError: "vault: timeout"},
	}}
	var text bytes.Buffer
	if err := WriteText(&text, v, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "render.txt", text.String())
	var js bytes.Buffer
	if err := WriteJSON(&js, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "render.json", js.String())
}

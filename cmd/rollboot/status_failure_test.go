package main

import (
	"bytes"
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := HostView{Host: tc.rec.Host, Phase: store.PhaseIdle}
			fillPlan(&v, tc.plan)
			fillAgentReport(&v, tc.rec)
			var b bytes.Buffer
			printStatus(&b, StatusView{Hosts: []HostView{v}}, at)
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

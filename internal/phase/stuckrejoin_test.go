package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host made stuck by the rejoin checks stays stuck until they pass or make
// progress. Before, it went back to rejoining at once, timed out again at once,
// and flapped between the two with a plan write and a "stuck" event per pass.
func TestStuckAfterRejoin(t *testing.T) {
	serversLate := "servers not back within 30m0s: nomad server of global on h1 is not a voter yet"
	// stuck after it had come back: its rejoin clock started 40 minutes ago, past the 30-minute timeout.
	stuckBack := func(mod func(*store.Plan)) store.Plan {
		return plan(store.PhaseStuck, func(p *store.Plan) {
			p.Timeline[store.PhaseDrained] = t0.Add(-45 * time.Minute)
			p.Timeline[store.PhaseRejoining] = t0.Add(-40 * time.Minute)
			p.LastError = serversLate
			if mod != nil {
				mod(p)
			}
		})
	}
	back := host("b2", false) // the agent reports its new boot ID
	ready := &NodeView{ID: "n1", Status: "ready", Eligible: true, ClientStartedAt: t0.Add(-time.Second)}
	tests := []struct {
		name    string
		in      Input
		phase   string
		write   bool
		event   string
		lastErr string
		check   func(t *testing.T, d Decision)
	}{
		{
			name: "its servers are still not back: stays stuck, writes nothing",
			in: Input{Plan: stuckBack(nil), Host: back, Node: ready, ServerGates: true,
				PostGate: WaitFor(WaitPostRebootGate, "nomad server of global on h1 is not a voter yet")},
			phase: store.PhaseStuck, lastErr: serversLate,
		},
		{
			name: "still not back, for another reason now: stays stuck and says which",
			in: Input{Plan: stuckBack(nil), Host: back, Node: ready, ServerGates: true,
				PostGate: WaitFor(WaitVaultUnseal, "h1")},
			phase: store.PhaseStuck, write: true,
			lastErr: "servers not back within 30m0s: Vault on h1 is sealed: an unseal is needed",
		},
		{
			name:  "every check passes: back in service, the slot freed",
			in:    Input{Plan: stuckBack(nil), Host: back, Node: ready, ServerGates: true},
			phase: store.PhaseIdle, write: true, event: "rebooted and back in service",
			check: func(t *testing.T, d Decision) {
				if d.History == nil || d.History.Outcome != "rebooted" {
					t.Errorf("history %+v, want a rebooted cycle", d.History)
				}
			},
		},
		{
			name:  "its node is ineligible: eligibility is restored, and it rejoins",
			in:    Input{Plan: stuckBack(nil), Host: back, Node: &NodeView{ID: "n1", Status: "ready", ClientStartedAt: t0.Add(-time.Second)}},
			phase: store.PhaseRejoining, write: true, event: "host is back after being reported stuck",
			check: func(t *testing.T, d Decision) {
				if !d.SetEligible {
					t.Error("eligibility not restored")
				}
				if got := d.Plan.Timeline[store.PhaseRejoining]; !got.Equal(t0.Add(-40 * time.Minute)) {
					t.Errorf("rejoin clock restarted at %s: it keeps running from the first return", got)
				}
			},
		},
		{
			name: "stuck before it came back (the reboot took too long): rejoins as before",
			in: Input{Plan: plan(store.PhaseStuck, func(p *store.Plan) { p.LastError = "the host did not come back within 30s" }),
				Host: back, Node: ready},
			phase: store.PhaseRejoining, write: true, event: "host is back after being reported stuck",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Timing = t0, timing
			tt.in.Plan.Waiting = Step(tt.in).Plan.Waiting // the status line is up to date
			d := Step(tt.in)
			if d.Plan.Phase != tt.phase || d.Write != tt.write || d.Event != tt.event {
				t.Fatalf("phase %s write %v event %q, want %s %v %q", d.Plan.Phase, d.Write, d.Event, tt.phase, tt.write, tt.event)
			}
			if tt.lastErr != "" && d.Plan.LastError != tt.lastErr {
				t.Errorf("last error %q, want %q", d.Plan.LastError, tt.lastErr)
			}
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

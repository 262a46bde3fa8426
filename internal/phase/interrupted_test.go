package phase

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// An operator who takes the node of a host in its cycle back (makes it
// eligible again, or drains it) ends the attempt: history "interrupted", the
// slot freed through a backoff, the node left as the operator set it. A drain
// of rollboot's that did not land is issued again; a node rebooted meanwhile
// goes on to its rejoin.
func TestOperatorTakesTheNodeBack(t *testing.T) {
	grantedAt := t0.Add(-2 * time.Minute) // plan(): the drain began then
	foreign := func(draining bool, started time.Time) func(*NodeView) {
		return func(n *NodeView) {
			n.Eligible, n.Draining, n.DrainGrant, n.DrainStartedAt = false, draining, "", started
			n.DrainStatus = "complete"
			if draining {
				n.DrainStatus = "draining"
			}
		}
	}
	inDraining := func(p *store.Plan) { p.Timeline[store.PhaseDraining] = grantedAt }
	bySelf := func(draining bool) func(*NodeView) {
		return func(n *NodeView) { foreign(draining, t0)(n); n.DrainBySelf = true }
	}
	eligibleAgain := func(n *NodeView) { drainedNode(n); n.Eligible = true }
	tests := []struct {
		name string
		in   Input
		why  string // "" when the attempt goes on
		want string // the phase it goes on in
	}{
		{name: "drained, made eligible again",
			in:  Input{Plan: plan(store.PhaseDrained, nil), Host: host("b1", true), Node: node(eligibleAgain)},
			why: "made eligible again"},
		{name: "rebooting, the agent holding, made eligible again",
			in:  Input{Plan: plan(store.PhaseRebooting, nil), Host: holdingHost("the node is eligible again"), Node: node(eligibleAgain)},
			why: "made eligible again"},
		{name: "rebooting, drained by someone else",
			in:  Input{Plan: plan(store.PhaseRebooting, nil), Host: host("b1", true), Node: node(foreign(true, t0))},
			why: "drained by someone else"},
		{name: "drained, someone else's drain completed since",
			in:  Input{Plan: plan(store.PhaseDrained, nil), Host: host("b1", true), Node: node(foreign(false, t0.Add(-time.Minute)))},
			why: "drained by someone else"},
		{name: "draining, someone else's drain replaced ours",
			in:  Input{Plan: plan(store.PhaseDraining, inDraining), Host: host("b1", true), Node: node(foreign(true, grantedAt.Add(time.Second)))},
			why: "drained by someone else"},
		{name: "draining, our drain did not land: issued again",
			in:   Input{Plan: plan(store.PhaseDraining, inDraining), Host: host("b1", true), Node: node(foreign(false, grantedAt.Add(-time.Hour)))},
			want: store.PhaseDraining},
		{name: "drained, the client drains itself on shutdown (drain_on_shutdown): the reboot goes on",
			in:   Input{Plan: plan(store.PhaseDrained, nil), Host: rebootingHost("g1"), Node: node(bySelf(true))},
			want: store.PhaseRebooting},
		{name: "rebooting, the client's own drain on shutdown completed: the reboot goes on",
			in:   Input{Plan: plan(store.PhaseRebooting, nil), Host: host("b1", true), Node: node(bySelf(false))},
			want: store.PhaseRebooting},
		{name: "rebooting, the node is back from the reboot: the rejoin goes on",
			in: Input{Plan: plan(store.PhaseRebooting, nil), Host: host("b2", false),
				Node: restartedNode(eligibleAgain)},
			want: store.PhaseRejoining},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Timing = t0, timing
			d := Step(tt.in)
			if tt.why == "" {
				if d.Plan.Phase != tt.want || d.History != nil && d.History.Outcome == "interrupted" {
					t.Fatalf("phase %s (history %+v), want it to go on in %s", d.Plan.Phase, d.History, tt.want)
				}
				return
			}
			if d.Plan.Phase != store.PhaseBackoff || d.History == nil || d.History.Outcome != "interrupted" ||
				!strings.Contains(d.History.Error, tt.why) || !strings.Contains(d.Plan.LastError, tt.why) {
				t.Fatalf("phase %s, history %+v, last error %q: want the attempt interrupted (%s)", d.Plan.Phase, d.History, d.Plan.LastError, tt.why)
			}
			if d.StartDrain || d.CancelDrain || d.MarkEligible || d.SetEligible {
				t.Errorf("decision %+v touches the node: it is the operator's", d)
			}
			if !d.Plan.NextTry.After(t0) || d.Plan.GrantID != "g1" {
				t.Errorf("next try %s grant %q: want a backoff that keeps the grant (its drain_aborted notification)", d.Plan.NextTry, d.Plan.GrantID)
			}
		})
	}
}

// An eligibility change can land between the agent's final go/no-go and the
// reboot: the attempt is interrupted, and the host reboots all the same. Once
// it is back with a new boot that its node backs, backing off or pending
// again, its cycle ends "rebooted" saying how the attempt had ended; an
// attempt interrupted before its drain completed, or a host not rebooted,
// goes on backing off.
func TestRebootedAfterTheInterruption(t *testing.T) {
	interruptedIn := func(phase string, drained bool) store.Plan {
		return plan(phase, func(p *store.Plan) {
			p.LastError = interruptedPrefix + "the node was made eligible again during the cycle"
			p.NextTry = t0.Add(time.Minute)
			if drained {
				p.Timeline[store.PhaseDrained] = t0.Add(-3 * time.Minute)
			}
		})
	}
	failedIn := plan(store.PhaseBackoff, func(p *store.Plan) {
		p.LastError = "pre-reboot hook failed"
		p.NextTry = t0.Add(time.Minute)
		p.Timeline[store.PhaseRebooting] = t0.Add(-2 * time.Minute)
	})
	tests := []struct {
		name     string
		plan     store.Plan
		host     *store.HostRecord
		rebooted bool
	}{
		{"backing off, back with a new boot", interruptedIn(store.PhaseBackoff, true), host("b2", false), true},
		{"pending again, back with a new boot", interruptedIn(store.PhasePending, true), host("b2", true), true},
		{"backing off, same boot", interruptedIn(store.PhaseBackoff, true), host("b1", true), false},
		{"a new boot its node does not back", interruptedIn(store.PhaseBackoff, true), host("b2", false), false},
		{"a new boot its node does not back past the rejoin timeout", func() store.Plan {
			p := interruptedIn(store.PhaseBackoff, true)
			p.PhaseSince = t0.Add(-timing.RejoinTimeout)
			return p
		}(), host("b2", false), false},
		{"interrupted before its drain completed", interruptedIn(store.PhaseBackoff, false), host("b2", false), false},
		{"a failed attempt, rebooted later", failedIn, host("b2", false), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := restartedNode(nil)
			if strings.Contains(tt.name, "does not back") {
				n = node(nil) // its client did not start again since the drain
			}
			d := Step(Input{Plan: tt.plan, Host: tt.host, Node: n, Now: t0, Timing: timing})
			got := d.History != nil && d.History.Outcome == "rebooted"
			if got != tt.rebooted {
				t.Fatalf("history %+v, phase %s: want rebooted %v", d.History, d.Plan.Phase, tt.rebooted)
			}
			// Not backed by the node within the rejoin timeout: it waits for
			// Nomad's word, keeping the plan (the need the new boot cleared
			// would otherwise forget the reboot).
			if waits := strings.HasSuffix(tt.name, "does not back"); waits != (d.Waiting.Kind == WaitRebooting && d.Plan.Phase == tt.plan.Phase) {
				t.Fatalf("waiting %v, phase %s: want it to wait for the node %v", d.Waiting, d.Plan.Phase, waits)
			}
			if got && (d.Plan.Phase != store.PhaseIdle || !strings.Contains(d.History.Error, "made eligible again") || d.Plan.GrantID != "") {
				t.Fatalf("plan %+v, history %+v: want the cycle ended idle, saying how the attempt had ended", d.Plan, d.History)
			}
		})
	}
}

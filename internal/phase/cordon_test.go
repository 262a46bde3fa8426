package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// cordoned records a cordon of node n1 made a minute before t0.
func cordoned(p *store.Plan) { p.CordonedAt, p.CordonNode = t0.Add(-time.Minute), "n1" }

// queuedInput is a pending host of a full group: it waits for a slot only.
func queuedInput(mod func(*store.Plan), n *NodeView) Input {
	return Input{Now: t0, Plan: plan(store.PhasePending, func(p *store.Plan) {
		p.GrantID, p.Attempt, p.EligibleBefore, p.NodeID, p.BootIDAtGrant = "", 0, false, "", ""
		if mod != nil {
			mod(p)
		}
	}), Host: host("b1", true), Node: n, Timing: timing, NotAdmitted: WaitFor(WaitQueued, `"web"`)}
}

func ineligible(n *NodeView) { n.Eligible = false }

// The cordon of a host next in line: recorded, then carried out; given back
// on every way out of the line without a drain; part of the drain at the
// grant; never an operator's toggle.
func TestCordon(t *testing.T) {
	tests := []struct {
		name string
		in   func() Input
		// want: the decision's cordon ops and what its plan records.
		cordon, setEligible, startDrain, write bool
		held                                   bool // the plan still records the cordon
		phase                                  string
		waits                                  WaitKind
		check                                  func(*testing.T, Decision)
	}{
		{name: "next in line: recorded, then cordoned", in: func() Input {
			in := queuedInput(nil, node(nil))
			in.Cordon = true
			return in
		}, cordon: true, write: true, held: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "cordoned and still next: nothing to do", in: func() Input {
			in := queuedInput(cordoned, node(ineligible))
			in.Cordon = true
			return in
		}, held: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "recorded, the node still eligible (a crash, an undo by hand): cordoned again", in: func() Input {
			in := queuedInput(cordoned, node(nil))
			in.Cordon = true
			return in
		}, cordon: true, held: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "no longer next (overtaken, cordon_next off, no room): given back", in: func() Input {
			return queuedInput(cordoned, node(ineligible))
		}, setEligible: true, write: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "given back by hand already: the record forgotten", in: func() Input {
			return queuedInput(cordoned, node(nil))
		}, write: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "the group paused: given back", in: func() Input {
			in := queuedInput(cordoned, node(ineligible))
			in.Paused, in.Cordon = true, true
			return in
		}, setEligible: true, write: true, phase: store.PhasePending, waits: WaitPaused},
		{name: "canceled: withdrawn and given back", in: func() Input {
			in := queuedInput(cordoned, node(ineligible))
			in.CancelAt = t0.Add(-time.Second)
			return in
		}, setEligible: true, write: true, phase: store.PhaseIdle},
		{name: "the need gone: withdrawn and given back", in: func() Input {
			in := queuedInput(cordoned, node(ineligible))
			in.Host = host("b1", false)
			return in
		}, setEligible: true, write: true, phase: store.PhaseIdle},
		{name: "granted: the cordon becomes part of the drain", in: func() Input {
			in := queuedInput(cordoned, node(ineligible))
			in.Admitted, in.NewGrantID, in.NotAdmitted = true, "g2", WaitReason{}
			return in
		}, startDrain: true, write: true, phase: store.PhaseDraining,
			check: func(t *testing.T, d Decision) {
				if !d.Plan.EligibleBefore {
					t.Error("the grant records the cordoned node as ineligible before: it would never be given back")
				}
			}},
		{name: "an operator's node left ineligible by their drain is not cordoned nor given back", in: func() Input {
			in := queuedInput(nil, node(func(n *NodeView) { n.Eligible, n.DrainStatus, n.DrainStartedAt = false, "complete", t0.Add(-time.Hour) }))
			in.Cordon = true
			return in
		}, write: true, phase: store.PhasePending, waits: WaitForeignIneligible}, // the hold's reason stored
		{name: "own cordon over an operator's old drain: not the operator's", in: func() Input {
			in := queuedInput(cordoned, node(func(n *NodeView) { n.Eligible, n.DrainStatus, n.DrainStartedAt = false, "complete", t0.Add(-time.Hour) }))
			in.Cordon = true
			return in
		}, held: true, phase: store.PhasePending, waits: WaitQueued},
		{name: "an operator drained the cordoned node since: theirs, forgotten untouched", in: func() Input {
			in := queuedInput(cordoned, node(func(n *NodeView) { n.Eligible, n.DrainStatus, n.DrainStartedAt = false, "complete", t0 }))
			in.Cordon = true
			return in
		}, write: true, phase: store.PhasePending, waits: WaitForeignIneligible},
		{name: "an operator drains it now: theirs, forgotten untouched", in: func() Input {
			in := queuedInput(cordoned, node(func(n *NodeView) { n.Eligible, n.Draining, n.DrainStatus = false, true, "draining" }))
			return in
		}, write: true, phase: store.PhasePending, waits: WaitForeignDrain},
		{name: "the host's node replaced: forgotten, the new node untouched", in: func() Input {
			in := queuedInput(cordoned, node(func(n *NodeView) { n.ID = "n2" }))
			in.Cordon = true
			return in
		}, write: true, phase: store.PhasePending, waits: WaitQueued}, // the next pass cordons n2
		{name: "no room: not cordoned, and why is recorded", in: func() Input {
			in := queuedInput(nil, node(nil))
			in.NoCordon = "the other nodes cannot spare it"
			return in
		}, write: true, phase: store.PhasePending, waits: WaitQueued,
			check: func(t *testing.T, d Decision) {
				if d.Plan.NoCordon != "the other nodes cannot spare it" {
					t.Errorf("NoCordon %q", d.Plan.NoCordon)
				}
			}},
		{name: "a node already ineligible by someone else is not cordoned", in: func() Input {
			in := queuedInput(nil, node(ineligible))
			in.Cordon = true
			return in
		}, phase: store.PhasePending, waits: WaitQueued},
		{name: "not ready: no cordon", in: func() Input {
			in := queuedInput(nil, node(func(n *NodeView) { n.Status = "down" }))
			in.Cordon = true
			return in
		}, write: true, phase: store.PhasePending, waits: WaitNodeNotReady}, // the hold's reason stored
		{name: "cordoned, the node went down: given back", in: func() Input {
			in := queuedInput(cordoned, node(func(n *NodeView) { n.Status, n.Eligible = "down", false }))
			in.Cordon = true
			return in
		}, setEligible: true, write: true, phase: store.PhasePending, waits: WaitNodeNotReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			d := Step(in)
			if d.Cordon != tt.cordon || d.SetEligible != tt.setEligible || d.StartDrain != tt.startDrain || d.Write != tt.write {
				t.Errorf("cordon %t, set eligible %t, start drain %t, write %t; want %t, %t, %t, %t",
					d.Cordon, d.SetEligible, d.StartDrain, d.Write, tt.cordon, tt.setEligible, tt.startDrain, tt.write)
			}
			if held := !d.Plan.CordonedAt.IsZero(); held != tt.held || held != (d.Plan.CordonNode != "") {
				t.Errorf("plan records cordon at %v of %q; want held %t", d.Plan.CordonedAt, d.Plan.CordonNode, tt.held)
			}
			if d.Plan.Phase != tt.phase {
				t.Errorf("phase %s, want %s", d.Plan.Phase, tt.phase)
			}
			if d.Waiting.Kind != tt.waits {
				t.Errorf("waits %v (kind %s), want kind %s", d.Waiting, d.Waiting.Kind.Name(), tt.waits.Name())
			}
			if tt.check != nil {
				tt.check(t, d)
			}
			if d.Cordon && d.SetEligible {
				t.Error("cordoned and given back at once")
			}
		})
	}
}

package phase

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// NodeGone tells a purged, renamed or replaced node from Nomad's node list,
// and nothing else: a node down for its reboot is still the host's.
func TestNodeGone(t *testing.T) {
	listed := func(mod func(*ListedNode)) *ListedNode {
		n := &ListedNode{ID: "n1", Name: "h1", Status: "ready", CreateIndex: 10}
		if mod != nil {
			mod(n)
		}
		return n
	}
	down := func(n *ListedNode) { n.Status = "down" }
	newer := ListedNode{ID: "n2", Name: "h1", Status: "ready", CreateIndex: 20}
	tests := []struct {
		name     string
		planNode string
		node     *ListedNode
		named    []ListedNode
		want     string // a part of the reason; "" when the node is still the host's
	}{
		{name: "no node taken out", planNode: "", node: nil},
		{name: "listed and ready", planNode: "n1", node: listed(nil), named: []ListedNode{*listed(nil)}},
		{name: "down for its reboot", planNode: "n1", node: listed(down), named: []ListedNode{*listed(down)}},
		{name: "purged", planNode: "n1", node: nil, want: "node n1 is no longer in Nomad's node list (purged)"},
		{name: "purged, its name taken by a new node", planNode: "n1", node: nil, named: []ListedNode{newer}, want: "purged"},
		{name: "renamed", planNode: "n1", node: listed(func(n *ListedNode) { n.Name = "h9" }), want: `node n1 is now named "h9"`},
		{name: "down, replaced by a newer node", planNode: "n1", node: listed(down), named: []ListedNode{*listed(down), newer},
			want: "node n1 is down and the host's name now belongs to node n2"},
		{name: "ready, with a newer node of the same name", planNode: "n1", node: listed(nil), named: []ListedNode{*listed(nil), newer}},
		{name: "down, the other node older", planNode: "n1", node: listed(down),
			named: []ListedNode{*listed(down), {ID: "n0", Name: "h1", Status: "ready", CreateIndex: 5}}},
		{name: "down, the newer node down too", planNode: "n1", node: listed(down),
			named: []ListedNode{*listed(down), {ID: "n2", Name: "h1", Status: "down", CreateIndex: 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodeGone("h1", tt.planNode, tt.node, tt.named)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("NodeGone = %q, want %q", got, tt.want)
			}
		})
	}
}

// A host out of service whose node is gone keeps its slot for the grace, with
// the reason in its wait; then the slot is released with a node_gone history
// and the node_gone notification's plan, nothing done to any node. A host that
// runs servers keeps its slot; a decision that ends the cycle stands; a node
// listed again clears the mark.
func TestNodeGoneReleasesTheSlot(t *testing.T) {
	const grace = 5 * time.Minute
	gone := "node n1 is no longer in Nomad's node list (purged)"
	since := func(at time.Time) func(*store.Plan) { return func(p *store.Plan) { p.NodeGoneSince = at } }
	tests := []struct {
		name      string
		in        Input
		phase     string // the phase decided
		wait      WaitKind
		since     time.Time // the plan's NodeGoneSince decided
		released  bool
		outcome   string // the history's outcome when it ends the cycle otherwise
		recheckAt time.Time
	}{
		{name: "draining, first seen gone: marked, the slot kept",
			in:    Input{Plan: plan(store.PhaseDraining, nil), NodeGone: gone},
			phase: store.PhaseDraining, wait: WaitNodeGone, since: t0, recheckAt: t0.Add(grace)},
		{name: "draining, the host's name on a new node: no drain issued to it",
			in: Input{Plan: plan(store.PhaseDraining, since(t0.Add(-time.Minute))), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.ID = "n2" }), NodeGone: "node n1 is down and the host's name now belongs to node n2"},
			phase: store.PhaseDraining, wait: WaitNodeGone, since: t0.Add(-time.Minute), recheckAt: t0.Add(4 * time.Minute)},
		{name: "rebooting, within the grace",
			in:    Input{Plan: plan(store.PhaseRebooting, since(t0.Add(-time.Minute))), NodeGone: gone},
			phase: store.PhaseRebooting, wait: WaitNodeGone, since: t0.Add(-time.Minute), recheckAt: t0.Add(4 * time.Minute)},
		{name: "rebooting, the grace over: released",
			in:    Input{Plan: plan(store.PhaseRebooting, since(t0.Add(-grace))), NodeGone: gone},
			phase: store.PhaseBackoff, released: true},
		{name: "drained, the agent's record naming a new node, the grace over: released",
			in: Input{Plan: plan(store.PhaseDrained, since(t0.Add(-time.Hour))), Host: host("b1", true),
				Node: node(func(n *NodeView) { n.ID = "n2" }), NodeGone: "node n1 is down and the host's name now belongs to node n2"},
			phase: store.PhaseBackoff, released: true},
		{name: "stuck without a node: abandoned at once, as any such host",
			in:    Input{Plan: plan(store.PhaseStuck, nil), Host: host("b1", true), NodeGone: gone},
			phase: store.PhaseBackoff, outcome: "abandoned"},
		{name: "a server host keeps its slot",
			in:    Input{Plan: plan(store.PhaseRebooting, func(p *store.Plan) { stableAtGrant(p); p.NodeGoneSince = t0.Add(-time.Hour) }), NodeGone: gone},
			phase: store.PhaseRebooting, wait: WaitRebooting},
		{name: "the node listed again: the mark cleared",
			in:    Input{Plan: plan(store.PhaseRebooting, since(t0.Add(-time.Minute))), Host: host("b1", true), Node: node(nil)},
			phase: store.PhaseRebooting, wait: WaitRebooting},
		{name: "rejoining, the cycle ends as it should: it stands",
			outcome: "rebooted",
			in: Input{Plan: plan(store.PhaseRejoining, since(t0.Add(-time.Hour))), Host: host("b2", false),
				Node: restartedNode(nil), NodeGone: gone},
			phase: store.PhaseIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Timing = t0, timing
			tt.in.Timing.NodeGoneGrace = grace
			d := Step(tt.in)
			if d.Plan.Phase != tt.phase {
				t.Fatalf("phase = %s (%s), want %s", d.Plan.Phase, d.Event, tt.phase)
			}
			if tt.released {
				if d.History == nil || d.History.Outcome != store.OutcomeNodeGone || !strings.Contains(d.History.Error, tt.in.NodeGone) {
					t.Fatalf("history = %+v, want outcome %s naming %q", d.History, store.OutcomeNodeGone, tt.in.NodeGone)
				}
				if !strings.HasPrefix(d.Plan.LastError, store.NodeGonePrefix) || !d.Plan.NodeGoneSince.IsZero() {
					t.Errorf("plan: last error %q, node gone since %v", d.Plan.LastError, d.Plan.NodeGoneSince)
				}
				if d.StartDrain || d.CancelDrain || d.SetEligible || d.MarkEligible {
					t.Errorf("a node operation on release: %+v", d)
				}
				if !d.Write || d.Plan.Active() {
					t.Errorf("the slot is not freed: write %v, active %v", d.Write, d.Plan.Active())
				}
				return
			}
			if d.History != nil && d.History.Outcome == store.OutcomeNodeGone {
				t.Fatalf("released: %+v", d.History)
			}
			if tt.outcome != "" {
				if d.History == nil || d.History.Outcome != tt.outcome {
					t.Errorf("history = %+v, want outcome %s", d.History, tt.outcome)
				}
				return
			}
			if tt.phase == store.PhaseIdle {
				return
			}
			if d.Waiting.Kind != tt.wait {
				t.Errorf("waiting = %v, want kind %s", d.Waiting, tt.wait.Name())
			}
			if !d.Plan.NodeGoneSince.Equal(tt.since) {
				t.Errorf("node gone since %v, want %v", d.Plan.NodeGoneSince, tt.since)
			}
			if d.StartDrain {
				t.Error("a drain issued while the node is gone")
			}
			if tt.wait == WaitNodeGone {
				if !strings.Contains(d.Plan.Waiting, tt.in.NodeGone) || !strings.Contains(d.Plan.Waiting, tt.since.Add(grace).Format(time.RFC3339)) {
					t.Errorf("status shows %q", d.Plan.Waiting)
				}
				if !d.RecheckAt.Equal(tt.recheckAt) {
					t.Errorf("recheck at %v, want %v", d.RecheckAt, tt.recheckAt)
				}
				if writesBeyondStatus(t, Input{Now: t0, Timing: tt.in.Timing, Plan: d.Plan, NodeGone: tt.in.NodeGone}, Step(Input{Now: t0, Timing: tt.in.Timing, Plan: d.Plan, NodeGone: tt.in.NodeGone})) {
					t.Error("a second pass on the same input writes again")
				}
			}
		})
	}
}

package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

func TestValidateRecords(t *testing.T) {
	nodes := map[string]*api.NodeListStub{
		"n1": {ID: "n1", Name: "web-1"},
		"n2": {ID: "n2", Name: "web-2.example.com"},
		"n3": {ID: "n3", Name: "twin"},
		"n4": {ID: "n4", Name: "twin"},
	}
	tests := []struct {
		name string
		rec  store.HostRecord
		want string // "" kept; else in the reason
	}{
		{name: "own node", rec: store.HostRecord{Host: "web-1", NodeID: "n1"}},
		{name: "dotted name", rec: store.HostRecord{Host: "web-2.example.com", NodeID: "n2"}},
		{name: "no node (server host)", rec: store.HostRecord{Host: "srv-1"}},
		{name: "shadowing another host's node", rec: store.HostRecord{Host: "web-2", NodeID: "n1"}, want: `the node of "web-1"`},
		{name: "unknown node", rec: store.HostRecord{Host: "web-3", NodeID: "n9"}, want: "no Nomad node"},
		{name: "tilde in the name", rec: store.HostRecord{Host: "web~1"}, want: `"~" or "/"`},
		// A client's record left without its node ID would be granted with
		// no drain: the host's node is the node of its name.
		{name: "a host with a node naming none", rec: store.HostRecord{Host: "web-1"}, want: "names no node_id, but the host has Nomad node n1"},
		{name: "a host with a node naming another", rec: store.HostRecord{Host: "web-1", NodeID: "n2"}, want: `the node of "web-2.example.com"`},
		{name: "one of two nodes of the name", rec: store.HostRecord{Host: "twin", NodeID: "n4"}},
		{name: "none of two nodes of the name", rec: store.HostRecord{Host: "twin"}, want: "Nomad node n3, n4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, bad := ValidateRecords([]store.HostRecord{tt.rec}, nodes)
			if tt.want == "" {
				if len(ok) != 1 || len(bad) != 0 {
					t.Errorf("ignored: %+v", bad)
				}
				return
			}
			if len(ok) != 0 || len(bad) != 1 || !strings.Contains(bad[0].Err, tt.want) {
				t.Errorf("kept %+v, ignored %+v; want ignored for %q", ok, bad, tt.want)
			}
		})
	}
}

func TestMissingAgents(t *testing.T) {
	now := t0
	ready := func(id string, mod func(*api.NodeListStub)) *api.NodeListStub {
		n := &api.NodeListStub{ID: id, Name: "h-" + id, Status: "ready", SchedulingEligibility: "eligible", ModifyIndex: 10}
		if mod != nil {
			mod(n)
		}
		return n
	}
	alloc := func(node, status string, age time.Duration, restarts uint64) *api.AllocationListStub {
		return &api.AllocationListStub{NodeID: node, DesiredStatus: api.AllocDesiredStatusRun, ClientStatus: status,
			CreateTime: now.Add(-age).UnixNano(), TaskStates: map[string]*api.TaskState{"agent": {Restarts: restarts}}}
	}
	other := alloc("n2", "running", time.Hour, 0)
	rec := func(id string) store.HostRecord {
		return store.HostRecord{Host: "h-" + id, NodeID: id, AgentVersion: "v"}
	}
	tests := []struct {
		name   string
		node   *api.NodeListStub
		rec    store.HostRecord
		allocs []*api.AllocationListStub
		index  uint64 // allocs table index; default 20 (after the node's last change)
		want   string // "" not missing; else in the reason
	}{
		{name: "running", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{alloc("n1", "running", time.Hour, 0)}},
		{name: "task died, waiting for its restart", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{alloc("n1", "pending", time.Hour, 1), other}, want: "died"},
		{name: "failed", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{alloc("n1", "failed", time.Hour, 2), other}, want: "failed"},
		{name: "just placed, starting", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{alloc("n1", "pending", 5*time.Second, 0), other}},
		{name: "placed long ago and never started", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{alloc("n1", "pending", 10*time.Minute, 0), other}, want: "still pending, 10m0s"},
		{name: "no allocation on an eligible node", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{other}, want: "no allocation"},
		{name: "node just made eligible: the scheduler has not placed it yet", node: ready("n1", nil), rec: rec("n1"),
			allocs: []*api.AllocationListStub{other}, index: 10},
		{name: "none on an ineligible node proves nothing", node: ready("n1", func(n *api.NodeListStub) { n.SchedulingEligibility = "ineligible" }),
			rec: rec("n1"), allocs: []*api.AllocationListStub{other}},
		{name: "node down: the host is down, not its agent", node: ready("n1", func(n *api.NodeListStub) { n.Status = "down" }),
			rec: rec("n1"), allocs: []*api.AllocationListStub{alloc("n1", "pending", time.Hour, 1)}},
		{name: "job not deployed (systemd agents): cannot tell", node: ready("n1", nil), rec: rec("n1")},
		{name: "FleetLock host has no agent", node: ready("n1", nil),
			rec:    store.HostRecord{Host: "h-n1", NodeID: "n1", Roles: []string{store.RoleFleetLock}},
			allocs: []*api.AllocationListStub{other}},
		{name: "host without a Nomad client is not checked", node: ready("n1", nil), rec: store.HostRecord{Host: "srv"},
			allocs: []*api.AllocationListStub{other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.index == 0 {
				tt.index = 20
			}
			nodes := map[string]*api.NodeListStub{tt.node.ID: tt.node}
			got := MissingAgents([]store.HostRecord{tt.rec}, nodes, agentAllocs("rollboot", tt.index, tt.allocs), now)[tt.rec.Host]
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("missing = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBadRecordsDoNotStopReconcile: through the emulator, a record that fails to
// decode and a record shadowing another host's node are skipped and reported;
// every other host goes on.
func TestBadRecordsDoNotStopReconcile(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 3}, nil)
	ctx := context.Background()
	st := store.New(c.Variables(), "rollboot", "")
	node := func(h string) string {
		n, err := sim.Node(h)
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	put := func(rec store.HostRecord) {
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	put(store.HostRecord{Host: "client-1", NodeID: node("client-1"), BootID: "b1"})
	put(store.HostRecord{Host: "client-3", NodeID: node("client-3"), BootID: "b3", RebootRequired: true,
		Reason: "sentinel", RequestedAt: time.Now().UTC()})
	// client-2's record does not decode.
	if _, _, err := c.Variables().Create(&api.Variable{Path: "rollboot/hosts/client-2",
		Items: map[string]string{"host": "client-2", "reboot_required": "maybe"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A record under another name shadows client-1's node and asks for a reboot.
	put(store.HostRecord{Host: "client-9", NodeID: node("client-1"), BootID: "x", RebootRequired: true,
		Reason: "forged", RequestedAt: time.Now().Add(-time.Hour).UTC()})

	co := New(Options{Nodes: c.Nodes(), Store: st, Jobs: c.Jobs(),
		DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2},
		Timing:       phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Minute, RetryMaxBackoff: time.Hour}})
	// One pass: the needs seen, stored pending and granted (handoff.go).
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := plans["client-3"]; p.Phase != store.PhaseDraining {
		t.Errorf("client-3 is %q, want draining: one bad record stopped the others", p.Phase)
	}
	if p, ok := plans["client-9"]; ok {
		t.Errorf("the shadowing record got a plan: %+v", p)
	}
	n1, _ := sim.Node("client-1")
	if n1.DrainStrategy != nil || n1.SchedulingEligibility != "eligible" {
		t.Errorf("client-1 was drained for a record that is not its own")
	}
	var ignored []string
	for _, b := range co.Ignored() {
		ignored = append(ignored, b.Host)
	}
	if strings.Join(ignored, ",") != "client-2,client-9" {
		t.Errorf("ignored = %v, want client-2 and client-9", co.Ignored())
	}
}

// TestIgnoredRecordStillGivesTheNodeBack: a host mid-cycle whose record is
// forged (and so ignored) still gets the node its plan took out of service back.
func TestIgnoredRecordStillGivesTheNodeBack(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 2}, nil)
	ctx := context.Background()
	st := store.New(c.Variables(), "rollboot", "")
	n1, _ := sim.Node("client-1")
	n2, _ := sim.Node("client-2")
	if _, err := c.Nodes().ToggleEligibility(n1.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-1", Phase: store.PhaseRejoining, PhaseSince: now, GrantID: "g1",
		NodeID: n1.ID, EligibleBefore: true, BootIDAtGrant: "b1",
		Timeline: map[string]time.Time{store.PhasePending: now, store.PhaseRejoining: now}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "client-1", NodeID: n2.ID, BootID: "b2"}); err != nil {
		t.Fatal(err)
	}
	co := New(Options{Nodes: c.Nodes(), Store: st,
		Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Minute, RetryMaxBackoff: time.Hour}})
	for i := 0; i < 3; i++ {
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := sim.Node("client-1")
	if n.SchedulingEligibility != "eligible" {
		t.Errorf("client-1 left %s", n.SchedulingEligibility)
	}
	if n, _ := sim.Node("client-2"); n.DrainStrategy != nil || n.SchedulingEligibility != "eligible" {
		t.Errorf("client-2 touched: %+v", n.DrainStrategy)
	}
}

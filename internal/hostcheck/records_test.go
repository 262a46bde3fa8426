package hostcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
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
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
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

package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

type fakeStore struct {
	hosts    []store.HostRecord
	bad      []store.BadRecord
	plans    map[string]store.Plan
	ctl      store.Control
	hostsErr error
	plansErr error
	ctlErr   error
}

func (f fakeStore) HostsChecked(context.Context, uint64, time.Duration) ([]store.HostRecord, []store.BadRecord, uint64, error) {
	return f.hosts, f.bad, 1, f.hostsErr
}

func (f fakeStore) PlansChecked(context.Context) (map[string]store.Plan, []store.BadRecord, error) {
	return f.plans, nil, f.plansErr
}

func (f fakeStore) Control(context.Context) (store.Control, error) { return f.ctl, f.ctlErr }
func (f fakeStore) Policy(context.Context) (store.PolicyRecord, error) {
	return store.PolicyRecord{}, store.ErrNotFound
}
func (f fakeStore) Enforcement(context.Context) (store.Enforcement, error) {
	return store.Enforcement{}, store.ErrNotFound
}
func (f fakeStore) LeaderLockIndex(context.Context) (uint64, error) { return 0, store.ErrNotFound }

type fakeNodes struct {
	nodes []*api.NodeListStub
	err   error
}

func (f fakeNodes) List(*api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	return f.nodes, &api.QueryMeta{LastIndex: 10}, f.err
}

type fakeJobs struct {
	allocs []*api.AllocationListStub
	err    error
	asked  string // namespace/job of the last call
}

func (f *fakeJobs) Allocations(job string, _ bool, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	f.asked = q.Namespace + "/" + job
	return f.allocs, &api.QueryMeta{LastIndex: 20}, f.err
}

// Read reports a store that cannot be read as an error, and what Nomad cannot
// tell in AgentCheck, with the rest of the view standing.
func TestRead(t *testing.T) {
	now := time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	node := func(id string) *api.NodeListStub {
		return &api.NodeListStub{ID: id, Name: "h-" + id, Status: "ready", SchedulingEligibility: "eligible", ModifyIndex: 5}
	}
	recs := []store.HostRecord{{Host: "h-n1", NodeID: "n1"}, {Host: "h-n2", NodeID: "n2"}, {Host: "h-n3", NodeID: "n1"}}
	ok := fakeStore{hosts: recs, bad: []store.BadRecord{{Host: "ghost", Err: "does not decode"}}}
	running := []*api.AllocationListStub{{NodeID: "n1", ClientStatus: "running", DesiredStatus: "run", CreateTime: now.Add(-time.Hour).UnixNano()}}
	tests := []struct {
		name      string
		st        fakeStore
		nodes     fakeNodes
		jobs      *fakeJobs
		agentJob  string
		wantErr   string
		wantCheck string
		missing   map[string]string // host -> part of AgentMissing
		ignored   []string          // hosts
	}{
		{name: "hosts unreadable", st: fakeStore{hostsErr: errors.New("403 hosts")}, wantErr: "403 hosts"},
		{name: "plans unreadable", st: fakeStore{plansErr: errors.New("403 plans")}, wantErr: "403 plans"},
		{name: "control unreadable", st: fakeStore{ctlErr: errors.New("403 control")}, wantErr: "403 control"},
		{name: "nodes unreadable", st: ok, nodes: fakeNodes{err: errors.New("500")}, agentJob: "rollboot",
			wantCheck: "cannot check host records against their nodes, nor agents: list nodes: 500", ignored: []string{"ghost"}},
		{name: "agents not checked", st: ok, nodes: fakeNodes{nodes: []*api.NodeListStub{node("n1"), node("n2")}},
			ignored: []string{"ghost", "h-n3"}},
		{name: "allocations unreadable", st: ok, nodes: fakeNodes{nodes: []*api.NodeListStub{node("n1"), node("n2")}},
			jobs: &fakeJobs{err: errors.New("boom")}, agentJob: "rollboot",
			wantCheck: "cannot tell which agents run: allocations of job rollboot: boom", ignored: []string{"ghost", "h-n3"}},
		{name: "job without allocations", st: ok, nodes: fakeNodes{nodes: []*api.NodeListStub{node("n1"), node("n2")}},
			jobs: &fakeJobs{}, agentJob: "rollboot",
			wantCheck: "job rollboot has no allocations in namespace ops: agents are not checked", ignored: []string{"ghost", "h-n3"}},
		{name: "missing agent", st: ok, nodes: fakeNodes{nodes: []*api.NodeListStub{node("n1"), node("n2")}},
			jobs: &fakeJobs{allocs: running}, agentJob: "rollboot",
			missing: map[string]string{"h-n2": "no allocation of job rollboot"}, ignored: []string{"ghost", "h-n3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.jobs == nil {
				tc.jobs = &fakeJobs{err: errors.New("not to be asked")}
			}
			v, err := Read(context.Background(), Source{Store: tc.st, Nodes: tc.nodes, Jobs: tc.jobs,
				AgentJob: tc.agentJob, AgentNamespace: "ops"}, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.AgentCheck != tc.wantCheck {
				t.Errorf("agent check %q, want %q", v.AgentCheck, tc.wantCheck)
			}
			var ignored []string
			for _, b := range v.Ignored {
				ignored = append(ignored, b.Host)
			}
			if strings.Join(ignored, ",") != strings.Join(tc.ignored, ",") {
				t.Errorf("ignored %v, want %v", ignored, tc.ignored)
			}
			rows := map[string]Host{}
			for _, h := range v.Hosts {
				rows[h.Host] = h
			}
			for _, h := range tc.ignored {
				if rows[h].RecordIgnored == "" {
					t.Errorf("row %s does not say its record is ignored: %+v", h, rows[h])
				}
			}
			for _, h := range v.Hosts {
				if want := tc.missing[h.Host]; (want == "") != (h.AgentMissing == "") || !strings.Contains(h.AgentMissing, want) {
					t.Errorf("%s: agent missing %q, want ~%q", h.Host, h.AgentMissing, want)
				}
			}
			if tc.agentJob != "" && tc.nodes.err == nil && tc.jobs.asked != "ops/rollboot" {
				t.Errorf("allocations asked of %q, want ops/rollboot", tc.jobs.asked)
			}
		})
	}
}

// Build gives a row to every host with a record, a plan or a manual request,
// in name order, and takes the plan's node and reason when the record has none.
func TestBuild(t *testing.T) {
	v := Build(
		[]store.HostRecord{{Host: "b", NodeID: "nb"}, {Host: "a", Reason: "kernel"}},
		map[string]store.Plan{"a": {Host: "a", Phase: store.PhasePending, Reason: "plan reason", NodeID: "na"},
			"c": {Host: "c", Phase: store.PhaseStuck, Reason: "sentinel"}},
		store.Control{Paused: true, PauseReason: "freeze", Requests: map[string]store.Request{"b": {}, "d": {}, "c": {}}})
	var got []string
	for _, h := range v.Hosts {
		got = append(got, h.Host+":"+h.Phase+":"+h.NodeID+":"+h.Reason)
	}
	want := "a:pending:na:kernel b:idle:nb: c:stuck::sentinel d:idle::"
	if strings.Join(got, " ") != want || !v.Paused || v.PauseReason != "freeze" {
		t.Fatalf("rows %q (paused %v %q), want %q", strings.Join(got, " "), v.Paused, v.PauseReason, want)
	}
	if !v.Hosts[1].ManualRequest || v.Hosts[2].ManualRequest || !v.Hosts[3].ManualRequest || v.Hosts[3].Waiting == "" {
		t.Fatalf("manual requests: %+v", v.Hosts)
	}
}

// A host whose agent's need a cancel suppresses says so, and how to ask again;
// a need found after the cancel, a request, or a host under way does not.
func TestBuildShowsACanceledNeed(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	need := func(host string, found time.Time) store.HostRecord {
		return store.HostRecord{Host: host, RebootRequired: true, RequestedAt: found}
	}
	v := Build(
		[]store.HostRecord{need("a", at.Add(-time.Hour)), need("b", at.Add(time.Minute)), need("c", at.Add(-time.Hour)),
			need("d", at.Add(-time.Hour)), {Host: "e"}},
		map[string]store.Plan{"d": {Host: "d", Phase: store.PhaseDraining}},
		store.Control{Cancels: map[string]time.Time{"a": at, "b": at, "c": at, "d": at, "e": at},
			Requests: map[string]store.Request{"c": {At: at.Add(time.Minute)}}})
	want := map[string]bool{"a": true}
	for _, h := range v.Hosts {
		shown := strings.Contains(h.Waiting, "its need was canceled at 2026-12-06T10:00:00Z") &&
			strings.Contains(h.Waiting, "`rollboot request "+h.Host+"`")
		if shown != want[h.Host] {
			t.Errorf("%s: waiting %q, want the canceled need shown: %v", h.Host, h.Waiting, want[h.Host])
		}
	}
}

// With no coordinator leading, a host that needs a reboot does not read as
// idle with nothing to do: status says it waits for a leader.
func TestWaitForLeader(t *testing.T) {
	build := func() View {
		return Build([]store.HostRecord{{Host: "a", RebootRequired: true}, {Host: "b"}, {Host: "c"}},
			map[string]store.Plan{}, store.Control{Requests: map[string]store.Request{"c": {}}})
	}
	for _, tc := range []struct {
		name string
		pol  Policy
		want map[string]bool
	}{
		{"none has led", Policy{}, map[string]bool{"a": true, "c": true}},
		{"the leader is gone", Policy{Leader: "h1", LeaderGone: true}, map[string]bool{"a": true, "c": true}},
		{"a leader", Policy{Leader: "h1"}, map[string]bool{}},
		{"cannot tell", Policy{ReadError: "403"}, map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := build()
			waitForLeader(&v, tc.pol)
			for _, h := range v.Hosts {
				if got := strings.Contains(h.Waiting, "no coordinator leads"); got != tc.want[h.Host] {
					t.Errorf("%s: waiting %q, want the missing leader said: %v", h.Host, h.Waiting, tc.want[h.Host])
				}
			}
		})
	}
}
